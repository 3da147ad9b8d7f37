#!/bin/bash
# Session 37 call 6 (H200): call 5's ncu again with the stall reasons (--print-details all): the batched step's streaming
# F16 kernel, pre-staged, tiled weights, at 64 rows (gptoss_kernels --moe-timing 64: its gate_up and down; call 5's
# filter matched nothing), and the prompt kernel's gate_up at 512 tokens without the cache.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
timeout 150 ncu --set full --print-details all --kernel-name-base demangled \
  -k 'regex:mxfp4_mma_stream_kernel<.*\(bool\)1, \(bool\)1, \(bool\)1>' -c 2 \
  $B/tests/gpu/gptoss_kernels --moe-timing 64 > $O/ncu-stream64.txt 2>&1
echo "ncu stream rc=$? ${SECONDS}s $(grep -c 'Duration' $O/ncu-stream64.txt) durations"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
LLMR_GPTOSS_WARMUP=0 LLMR_GPTOSS_EXPERT_CACHE=0 timeout 150 ncu --set full --print-details all --kernel-name-base demangled \
  -k regex:mxfp4_prompt_gemm_kernel -c 1 $B/bench/prefill --model /tmp/m20b --lengths 512 --reps 1 > $O/ncu-prompt512.txt 2>&1
echo "ncu prompt rc=$? ${SECONDS}s $(grep -c 'Duration' $O/ncu-prompt512.txt) durations"
grep -E "Duration|DRAM Throughput|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Stall|stall" \
  $O/ncu-stream64.txt | cut -c1-150 | head -40
echo "total ${SECONDS}s"
