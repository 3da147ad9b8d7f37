#!/usr/bin/env bash
# bench/prefill/run.sh — one command for the prefill table: llmr (build/bench/prefill) and, beside it,
# transformers on the same checkpoint and lengths (bench/prefill/hf_prefill.py) when torch is present.
#
#   bench/prefill/run.sh --model DIR [--build DIR] [--lengths 128,512,1024,4096] [--reps 3]
#                        [--no-transformers] [--hf-timeout 300]
#
# The GPU's dense bf16 peak for "% peak" comes from its name (nvidia-smi): H100/H200 SXM 989.4,
# H100 PCIe 756 TFLOP/s; otherwise pass LLMR_PEAK_TFLOPS. The transformers run is bounded by
# --hf-timeout seconds (it is killed after that, the table so far kept). Exit status: llmr's.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=build model="" lengths=128,512,1024,4096 reps=3 hf=1 hf_timeout=300
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --model) model=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --lengths) lengths=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --no-transformers) hf=0; shift ;;
    --hf-timeout) hf_timeout=$2; shift 2 ;;
    *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$model" ] || { echo "run.sh: --model DIR is required" >&2; exit 2; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
peak=${LLMR_PEAK_TFLOPS:-}
if [ -z "$peak" ]; then
  case "$gpu" in
    *H100*PCIe*) peak=756 ;;
    *H100*|*H200*|*GH200*) peak=989.4 ;;
    *) peak=989.4 ;;
  esac
fi
echo "== llmr gptoss_cuda prefill"
"$build/bench/prefill" --model "$model" --lengths "$lengths" --reps "$reps" --peak-tflops "$peak" --gpu "${gpu:-unknown}"
rc=$?
if [ "$hf" = 1 ]; then
  echo "== transformers prefill (bf16, MXFP4 dequantized), same checkpoint, bounded by ${hf_timeout}s"
  if python3 -c 'import torch, transformers' 2>/dev/null; then
    timeout "$hf_timeout" python3 -u "$here/hf_prefill.py" --model "$model" --lengths "$lengths" --reps 2 2>&1 |
      grep -v -i -E 'warn|deprecat|^\s*$' || echo "(transformers run stopped: status ${PIPESTATUS[0]})"
  else
    echo "SKIP transformers prefill: python3 has no torch + transformers"
  fi
fi
exit $rc
