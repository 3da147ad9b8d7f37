#!/bin/bash
# session 16 call 7 (branch of the tag s16-moe-tc1-experiment): the arithmetic alone (mode 11: no weight loads,
# wrong sums) against the loads alone (mode 2, 10.1 us), and the weights through a per-warp cp.async ring of 8 / 12
# k-steps (modes 12, 13: no registers held, so deep). Kernel checks + timings of the block, bench/decode main vs
# modes 12 and 13 twice (modes 12-13 read h's fragments from the previous launch: the bench's numbers are timing
# only, its tokens are not checked).
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
  echo "=== TC mode 12"; LLMR_GPTOSS_MOE_TC=12 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== TC mode 13"; LLMR_GPTOSS_MOE_TC=13 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
echo "total ${SECONDS}s"
