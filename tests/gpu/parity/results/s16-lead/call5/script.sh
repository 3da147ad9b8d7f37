#!/bin/bash
# session 16 call 5: call 4's SASS showed each mma's B fragment loaded right before it into one reused register
# (load, wait, mma, next load): now the 8 B fragments of a k-step are loaded first, and ACC2 alternates the
# accumulator per mma (two chains of 4). Kernel checks + timings of the block, SASS of mode 5's gate_up,
# bench/decode main vs modes 1 and 5 twice.
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
B=/tmp/B/build; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 120 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"
grep -E "^FAIL|tensor-core|checks" $O/kernels.txt | cut -c1-200
grep -E "timing (gate_up_decode|down_decode|MoE block)" $O/kernels.txt | grep -E "table|tensor|control"
cuobjdump -sass $NEW 2>/dev/null | awk '/Function : _Z22moe_gate_up_tc1_kernelILi4ELi6E/{f=1} f&&/Function : /&&!/ILi4ELi6E/{f=0} f' > $O/sass-gu6.txt; wc -l < $O/sass-gu6.txt
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
{ for i in 1 2; do
  echo "=== main"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== TC mode 1"; LLMR_GPTOSS_MOE_TC=1 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== TC mode 5"; LLMR_GPTOSS_MOE_TC=5 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
echo "total ${SECONDS}s"
