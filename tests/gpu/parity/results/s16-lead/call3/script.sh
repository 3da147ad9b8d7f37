#!/bin/bash
# session 16 call 3: where the tensor-core T = 1 expert GEMVs lose their time. Call 2: gate_up 19.0 us (loads alone
# 10.8), down 15.7 (loads alone 11.7), both staging x per block / warp. Modes (moe_decode_tc.cu): 4 fragments of x
# in global memory written by a producer (a stage kernel for h, gate_up's epilogue for act), 5 + two mma chains,
# 6 = 5 without the stage kernel. Kernel checks of the block (--moe-decode-timing), ncu of mode 6's gate_up and
# mode 5's down, bench/decode main vs modes 1 and 5.
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
B=/tmp/B/build; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 120 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"
grep -E "^FAIL|tensor-core|checks" $O/kernels.txt | cut -c1-200
grep -E "timing (gate_up_decode|down_decode|MoE block)" $O/kernels.txt
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis"
timeout 120 ncu --kernel-name-base mangled -k regex:_Z22moe_gate_up_tc1_kernelILi4ELi6E -c 1 $S $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/ncu-gu6.txt 2>&1; echo "ncu gu rc=$? ${SECONDS}s"
timeout 120 ncu --kernel-name-base mangled -k regex:_Z19moe_down_tc1_kernelILi4ELi6E -c 1 $S $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/ncu-dn5.txt 2>&1; echo "ncu dn rc=$? ${SECONDS}s"
grep -E "Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|No Eligible|L1/TEX Hit|L2 Hit|Executed Ipc A" $O/ncu-gu6.txt $O/ncu-dn5.txt
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
{ for i in 1 2; do
  echo "=== main"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== TC mode 1"; LLMR_GPTOSS_MOE_TC=1 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== TC mode 5"; LLMR_GPTOSS_MOE_TC=5 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
echo "total ${SECONDS}s"
