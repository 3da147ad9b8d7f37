#!/bin/bash
# session 16 call 2: call 1 hung in the kernel checks (the tensor-core kernels' fast/slow branch was per lane around
# mma.sync; now warp-uniform). Kernel checks (line-buffered, with the tensor-core kernels' loads-only and 8-deep
# variants timed), then bench/decode default vs LLMR_GPTOSS_MOE_TC=1 twice.
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
B=/tmp/B/build; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 300 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"; tail -1 $O/kernels.txt; grep -E "^FAIL" $O/kernels.txt | head
grep -E "tensor-core" $O/kernels.txt | cut -c1-200
grep -E "timing (gate_up_decode|down_decode|MoE block)" $O/kernels.txt | grep "T=1"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
{ for i in 1 2; do
  echo "=== main"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== TC"; LLMR_GPTOSS_MOE_TC=1 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
echo "total ${SECONDS}s"
