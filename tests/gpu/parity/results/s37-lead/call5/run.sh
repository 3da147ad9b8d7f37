#!/bin/bash
# Session 37 call 5 (H200): what bounds the two few-rows MXFP4 kernels. The prompt kernel at 512 tokens without the
# cache takes ~11.5 ms of the experts' ~2.4 ms weight read (32-64 rows an expert: neither its tensor work, ~2.5 ms at
# 64-row tiles, nor its decode issue explains it), and the batched step's streaming F16 kernel at 64 rows ~0.29 ms a
# layer against ~0.1. (1) bench/prefill without the cache, A B C A B C: main, MP_AHEAD 12 and 3 (super-chunks of a
# warp's weights prefetched into L2 ahead; 6 now); (2) ncu --set full of the prompt kernel's first gate_up and down at
# 512 tokens; (3) the same of the streaming kernel's pre-staged tiled F16 launches at 64 rows (--moe-timing 64).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for r in 1 2; do for v in base ah12 ah3; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; [ $v != base ] && E=/tmp/B/alt/$v/engines/gptoss_cuda/libgptoss_cuda.so
  LLMR_GPTOSS_EXPERT_CACHE=0 timeout 60 $B/bench/prefill --engine $E --model /tmp/m20b --lengths 256,512,1024,4096 \
    --reps 3 > /tmp/pf.txt 2>&1
  echo "$v $r rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s | ", $1, $2}') ${SECONDS}s"
  { echo "== $v $r"; cat /tmp/pf.txt; } >> $O/prefill.txt
done; done
LLMR_GPTOSS_WARMUP=0 LLMR_GPTOSS_EXPERT_CACHE=0 timeout 150 ncu --set full --kernel-name-base demangled \
  -k regex:mxfp4_prompt_gemm_kernel -c 2 $B/bench/prefill --model /tmp/m20b --lengths 512 --reps 1 > $O/ncu-prompt512.txt 2>&1
echo "ncu prompt rc=$? ${SECONDS}s $(grep -c 'Duration' $O/ncu-prompt512.txt) durations"
timeout 150 ncu --set full --kernel-name-base demangled -k "regex:mxfp4_mma_stream_kernel<.*true, true, true>" -c 2 \
  $B/tests/gpu/gptoss_kernels --moe-timing 64 > $O/ncu-stream64.txt 2>&1
echo "ncu stream rc=$? ${SECONDS}s $(grep -c 'Duration' $O/ncu-stream64.txt) durations"
grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible|Compute \(SM\) Throughput" \
  $O/ncu-prompt512.txt $O/ncu-stream64.txt | cut -c1-160 | head -40
echo "total ${SECONDS}s"
