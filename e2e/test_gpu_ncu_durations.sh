#!/usr/bin/env bash
# tests/gpu/ncu_durations.sh as a call script meets it: --help, bad arguments named, and its summary of an ncu CSV
# (--summarize: no GPU needed): one "NAME COUNT x AVG ns;" per kernel name, the averages over that name's launches.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d /tmp/llmr-ncu-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
. e2e/lib/check.sh
S=tests/gpu/ncu_durations.sh
check "--help" 0 "ncu_durations.sh [--skip N]" -- "$S" --help
check "unknown option" 2 "unknown option --frob" -- "$S" --frob
check "no command" 2 "want REGEX -- COMMAND" -- "$S" 'moe_'
check "--summarize without a file" 2 "--summarize wants a CSV file" -- "$S" --summarize "$tmp/none.csv"
# two launches of one kernel, one of another, as ncu --csv writes them (a notice line before, as ncu prints)
cat > "$tmp/n.csv" <<'CSV'
==PROF== Connected to process 1 (bench/decode)
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","decode","h","void gemv1_kernel<1>(const float *, int)","1","7","(256, 1, 1)","(360, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","14,000"
"1","1","decode","h","qkv_decode_kernel(const float *)","1","7","(256, 1, 1)","(320, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","12,800"
"2","1","decode","h","void gemv1_kernel<1>(const float *, int)","1","7","(256, 1, 1)","(360, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","15,000"
CSV
check "--summarize: gemv1" 0 "void gemv1_kernel<1> 2 x 14500 ns;" -- "$S" --summarize "$tmp/n.csv"
check "--summarize: qkv" 0 "qkv_decode_kernel 1 x 12800 ns;" -- "$S" --summarize "$tmp/n.csv"
if ! command -v ncu >/dev/null; then
  check "no ncu named" 2 "no ncu here" -- "$S" 'moe_' -- true
fi
exit $fail
