#!/bin/bash
# session 16 call 6: mode 9 = mode 1 gate_up + CUDA-core down; mode 10 = gate_up over two K halves (D = 3, <= 85 registers: 24 warps per SM) + CUDA-core down.
# Kernel checks + timings of the block, bench/decode main vs modes 9 and 10 twice.
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
B=/tmp/B/build; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 120 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"
grep -E "^FAIL|tensor-core|checks" $O/kernels.txt | cut -c1-200
grep -E "timing (gate_up_decode|down_decode|MoE block)" $O/kernels.txt | grep -E "table|tensor|control"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
{ for i in 1 2; do
  echo "=== main"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== TC mode 9"; LLMR_GPTOSS_MOE_TC=9 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== TC mode 10"; LLMR_GPTOSS_MOE_TC=10 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
echo "total ${SECONDS}s"
