#!/bin/bash
# Session 34 call 5 (H200): gptoss_mxfp4_prompt_gemm with three phase buffers, so no phase waits for the tensor cores
# to drain (call 4: ~210 TFLOP/s at every length, cuBLAS ~440 at 4,096 tokens). 1) the prompt matmuls' checks;
# 2) bench/prefill at 256..4,096 tokens: cuBLAS (LLMR_GPTOSS_PROMPT_MMA=0), the kernel, and the kernel on 64-row tiles
# only (LLMR_GPTOSS_PROMPT_MMA_WIDE=100000), part by part: where it wins, for the default crossover.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 & MK=$!
timeout 150 $B/tests/gpu/gptoss_kernels --tc-checks > $O/tc-checks.txt 2>&1; echo "tc-checks rc=$? ${SECONDS}s"
grep -E "prompt_gemm.*(800|precise)" $O/tc-checks.txt | cut -c1-200; grep -E "^FAIL|FAIL " $O/tc-checks.txt | head -10; tail -1 $O/tc-checks.txt
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
for v in cublas mma mma64; do
  case $v in cublas) E="LLMR_GPTOSS_PROMPT_MMA=0";; mma) E="LLMR_GPTOSS_PROMPT_MMA=1048576";; mma64) E="LLMR_GPTOSS_PROMPT_MMA_WIDE=100000";; esac
  env $E LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 100 $B/bench/prefill --model /tmp/m20b --lengths 256,384,512,768,1024,2048,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "prefill $v rc=$?"; grep -E "^ +[0-9]+ " /tmp/pf.txt | awk '{printf "%s %s ms | ", $1, $2} END {print ""}'
  grep -E "prefill profile" /tmp/pf.txt | tail -21 | awk 'NR%3==0' | sed -E 's/.*T=([0-9]+).*experts ([0-9.]+) ms.*layers ([0-9.]+) ms/T=\1 experts \2 layers \3/' | tr '\n' ' '; echo
  { echo "== $v"; cat /tmp/pf.txt; } >> $O/prefill.txt
done
echo "total ${SECONDS}s"
