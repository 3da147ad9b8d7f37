#!/bin/bash
# Session 34 call 2 (H200): gptoss_mxfp4_prompt_gemm (moe_mma_prompt.cu), the prompt's fp16 expert GEMMs on the MXFP4
# weights. 1) every kernel check (the new ones: prompt_gemm against cuBLAS's sums and the CPU, precise rows);
# 2) bench/prefill with it (default) and without (LLMR_GPTOSS_PROMPT_MMA=0), part by part; 3) bench/throughput at 64
# streams, it against cuBLAS, and LLMR_GPTOSS_BATCH_MOE_PRESTAGE=0 (call 1's kernel timing had the pre-staged form
# slower at T = 64 on this card).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 & MK=$!
timeout 240 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"
grep -E "prompt_gemm" $O/kernels.txt | cut -c1-220; grep -E "^FAIL|FAIL:" $O/kernels.txt | head -10; tail -3 $O/kernels.txt
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
for v in 0 1048576; do
  LLMR_GPTOSS_PROMPT_MMA=$v LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 90 $B/bench/prefill --model /tmp/m20b --lengths 256,512,1024,2048,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "prefill PROMPT_MMA=$v rc=$?"; grep -E "^ +[0-9]+ " /tmp/pf.txt
  grep -E "prefill profile" /tmp/pf.txt | tail -8 | sed 's/gptoss_cuda prefill profile //' | cut -c1-200
  { echo "== PROMPT_MMA=$v"; cat /tmp/pf.txt; } >> $O/prefill.txt
done
for r in 1 2; do for v in cublas mma prestage0; do
  case $v in cublas) E="LLMR_GPTOSS_PROMPT_MMA=0";; mma) E="LLMR_GPTOSS_PROMPT_MMA=1048576";; prestage0) E="LLMR_GPTOSS_BATCH_MOE_PRESTAGE=0";; esac
  env $E timeout 60 $B/bench/throughput --model /tmp/m20b --streams 64 > /tmp/t.txt 2>&1
  echo "tp $v run $r rc=$?: $(grep -E '^ +64 ' /tmp/t.txt) | $(grep -oE 'prefill [0-9.]+ s GPU \([0-9]+ slices, [0-9]+ tokens, [0-9.]+ ms/slice\)' /tmp/t.txt)"
  { echo "== $v run $r"; cat /tmp/t.txt; } >> $O/tp64.txt
done; done
echo "total ${SECONDS}s"
