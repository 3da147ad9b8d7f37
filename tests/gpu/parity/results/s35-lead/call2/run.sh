#!/bin/bash
# Session 35 call 2 (H200): what bounds gptoss_mxfp4_prompt_gemm (B in the 128-byte swizzle, call 1: 4,096 tokens
# 135.8 -> 122 ms; ncu: IPC 2.15, no eligible warp 46%). 1) ablations, timing only (their results are wrong on
# purpose): nodec (the A fragments straight from the loaded words, no decode), nomma (no wgmma), nostage (no copy of B
# into shared memory); the experts' part of bench/prefill at 1,024 and 4,096 tokens with the kernel at every length;
# 2) ncu of the landed form's 128-row launches with the warp states and source counters in detail; 3) its SASS.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1
echo "mkmodel rc=$? ${SECONDS}s"
for v in sw nodec nomma nostage sw; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; [ $v != sw ] && E=/tmp/B/alt/$v/engines/gptoss_cuda/libgptoss_cuda.so
  LLMR_GPTOSS_PROMPT_MMA=4096 LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 90 $B/bench/prefill --engine $E --model /tmp/m20b \
    --lengths 1024,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "$v rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s ms | ", $1, $2}')" \
    "$(grep -E 'prefill profile' /tmp/pf.txt | tail -6 | sed -E 's/.*T=([0-9]+).*experts ([0-9.]+) ms.*/T=\1 experts \2/' | tr '\n' ' ')"
  { echo "== $v"; cat /tmp/pf.txt; } >> $O/prefill.txt
done
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
LLMR_GPTOSS_PROMPT_MMA=4096 timeout 150 $NCU --clock-control none --kernel-name-base demangled \
  --kernel-name "regex:prompt_gemm_kernel<.int.16," --launch-count 1 --section WarpStateStats --section SourceCounters \
  --section SchedulerStats --print-details all \
  $B/bench/prefill --model /tmp/m20b --lengths 1024 --reps 1 > $O/ncu-stalls.txt 2>&1
echo "ncu rc=$? ${SECONDS}s"
grep -iE "stall|Warp Cycles" $O/ncu-stalls.txt | head -40
CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
$CUOBJ -sass -fun '_Z24mxfp4_prompt_gemm_kernelILi16ELb0EEvPKti18gptoss_mxfp4_tiledPKiS4_S4_iiiiiPfi' \
  $B/engines/gptoss_cuda/libgptoss_cuda.so > $O/sass-n128.txt 2>&1; echo "sass rc=$? $(wc -l < $O/sass-n128.txt) lines"
echo "total ${SECONDS}s"
