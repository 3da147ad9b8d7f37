#!/usr/bin/env bash
# tests/gpu/gate.sh — the gate an engine change passes before it lands (docs/development.md), as one
# command on a GPU machine. Each step prints one line "GATE <step>: PASS|FAIL|SKIP (detail)"; full logs
# go to OUT/gate/<step>.txt.
#
#   tests/gpu/gate.sh [--build DIR] [--out DIR] [--full] [--steps "kernels selftest parity batching serving"]
#
#   kernels   BUILD/tests/gpu/gptoss_kernels: every CUDA kernel against a plain CPU loop
#   selftest  BUILD/tests/gpu/gptoss_parity: the engine through its ABI on a tiny checkpoint (errors,
#             determinism, chunked vs split prefill, stops, logits against the C reference engine)
#   parity    tests/gpu/parity/run.sh: logits against transformers fp32, presets tiny + small + 20b-2l (the
#             20b's shapes, so its decode paths: router split, dp4a ring), prompts of
#             16 / 300 / 2,000 tokens, 64 greedy steps (needs python3 with torch + transformers)
#   batching  BUILD/tests/gpu/gptoss_batching on a tiny checkpoint; --full also on the full-size 20b
#   serving   e2e/gpu/serving.sh (hub + router + two nodes on the CUDA engine, over HTTP); --full also
#             FULL=1 (2 x 13 GB of VRAM). Needs the tokenizer fixture: LLMR_CACHE as on the build machine.
#
# Exit 0 when every step passed; 1 when one failed or skipped (a skipped step is not a passed gate);
# 0 with "SKIP: no NVIDIA GPU" where there is no GPU at all.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build OUTDIR=${OUT:-/tmp/llmr-gate} FULL=0 STEPS="kernels selftest parity batching serving"
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$(cd "$2" && pwd) || exit 2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    --full) FULL=1; shift ;;
    --steps) STEPS=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gate.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no NVIDIA GPU here"; exit 0
fi
LOG=$OUTDIR/gate
mkdir -p "$LOG" || exit 2
WORK=$(mktemp -d /tmp/llmr-gate.XXXXXX) || exit 2
trap 'rm -rf "$WORK"' EXIT
echo "gate on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), build $BUILD, logs in $LOG"
failed=0

# verdict STEP RC DETAIL: rc 0 pass, 77 skip, else fail
verdict() {
  local v=FAIL
  [ "$2" = 0 ] && v=PASS
  [ "$2" = 77 ] && v=SKIP
  [ "$v" = PASS ] || failed=1
  echo "GATE $1: $v ($3)"
}
# ran RC LOGFILE: the rc, or 77 when the program said it skipped (the GPU programs exit 0 with "SKIP ...")
ran() { if grep -q '^SKIP' "$2"; then echo 77; else echo "$1"; fi; }
# need FILE...: 77 with a message when a built file is missing
need() {
  for f in "$@"; do [ -x "$f" ] || { echo "missing $f (build with nvcc first)"; return 77; }; done
}

for step in $STEPS; do
  case "$step" in
    kernels)
      if need "$BUILD/tests/gpu/gptoss_kernels" > "$LOG/kernels.txt"; then
        "$BUILD/tests/gpu/gptoss_kernels" > "$LOG/kernels.txt" 2>&1; rc=$(ran $? "$LOG/kernels.txt")
      else rc=77; fi
      verdict kernels $rc "$(tail -1 "$LOG/kernels.txt")" ;;
    selftest)
      if need "$BUILD/tests/gpu/gptoss_parity" > "$LOG/selftest.txt"; then
        timeout 600 "$BUILD/tests/gpu/gptoss_parity" > "$LOG/selftest.txt" 2>&1; rc=$(ran $? "$LOG/selftest.txt")
      else rc=77; fi
      verdict selftest $rc "$(tail -1 "$LOG/selftest.txt")" ;;
    parity)
      PARITY_WORK=$WORK/parity timeout 900 "$ROOT/tests/gpu/parity/run.sh" --build "$BUILD" --out "$LOG/parity" \
        --presets "tiny small 20b-2l" --seeds 1 --lengths "16 300 2000" --no-unit > "$LOG/parity.txt" 2>&1
      rc=$(ran $? "$LOG/parity.txt") # run.sh exits 0 with SKIP when torch/transformers are missing
      if [ $rc = 0 ] && ! grep -q 'ALL PASS' "$LOG/parity.txt"; then rc=1; fi
      verdict parity $rc "$(grep -E '^SKIP|ALL PASS|^FAIL' "$LOG/parity.txt" | head -1 | cut -c1-160)" ;;
    batching)
      if need "$BUILD/tests/gpu/gptoss_batching" "$BUILD/bin/llmr-mkmodel" > "$LOG/batching.txt"; then
        timeout 600 "$BUILD/tests/gpu/gptoss_batching" --mkmodel "$BUILD/bin/llmr-mkmodel" > "$LOG/batching.txt" 2>&1
        rc=$(ran $? "$LOG/batching.txt")
        verdict batching $rc "tiny: $(tail -1 "$LOG/batching.txt")"
        if [ $FULL = 1 ]; then
          { "$BUILD/bin/llmr-mkmodel" --preset 20b --seed 1 --out "$WORK/m20b" &&
            timeout 900 "$BUILD/tests/gpu/gptoss_batching" --model "$WORK/m20b"; } > "$LOG/batching20b.txt" 2>&1
          rc=$(ran $? "$LOG/batching20b.txt")
          rm -rf "$WORK/m20b"
          verdict batching-20b $rc "$(tail -1 "$LOG/batching20b.txt")"
        fi
      else verdict batching 77 "$(cat "$LOG/batching.txt")"; fi ;;
    serving)
      LLMR_BUILD=$BUILD timeout 900 bash "$ROOT/e2e/gpu/serving.sh" > "$LOG/serving.txt" 2>&1; rc=$?
      verdict serving $rc "tiny: $(grep -E 'PASS|FAIL|SKIP' "$LOG/serving.txt" | tail -1 | cut -c1-160)"
      if [ $FULL = 1 ]; then
        LLMR_BUILD=$BUILD FULL=1 timeout 1200 bash "$ROOT/e2e/gpu/serving.sh" > "$LOG/serving20b.txt" 2>&1; rc=$?
        verdict serving-20b $rc "$(grep -E 'PASS|FAIL|SKIP' "$LOG/serving20b.txt" | tail -1 | cut -c1-160)"
      fi ;;
    *) echo "gate.sh: unknown step $step (kernels selftest parity batching serving)" >&2; exit 2 ;;
  esac
done
[ $failed = 0 ] && echo "GATE: ALL PASS" || echo "GATE: NOT PASSED"
exit $failed
