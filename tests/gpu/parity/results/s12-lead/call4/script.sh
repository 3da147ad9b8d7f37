#!/bin/bash
# session 12 call 4: one grouped cuBLAS call per expert projection (LLMR_GPTOSS_TC_GROUPED=1) vs a GEMM per
# expert over 4 streams (and 8 streams), prompts of 256 .. 4,096 tokens
B=$PWD/.gpu-lead/build; O=$OUT
nvidia-smi --query-gpu=name --format=csv,noheader
$B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$?"; tail -1 $O/kernels.txt; grep -E "^FAIL|grouped" $O/kernels.txt | head | cut -c1-170
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
L=256,512,1024,4096
run() { echo "=== $1"; shift; env "$@" LLMR_GPTOSS_PREFILL_PROFILE=1 $B/bench/prefill --model /tmp/m20b --lengths $L --reps 3 2>&1 | grep -E "profile T=(512|4096)|^ +[0-9]+ +[0-9.]+ " | cut -c1-200 | tail -6; }
{ run "default" A=1; run "GROUPED=1" LLMR_GPTOSS_TC_GROUPED=1; run "TC_STREAMS=8" LLMR_GPTOSS_TC_STREAMS=8;
  run "default again" A=1; run "GROUPED=1 again" LLMR_GPTOSS_TC_GROUPED=1; } > $O/grouped.txt 2>&1; cat $O/grouped.txt
