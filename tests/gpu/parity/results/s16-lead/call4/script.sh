#!/bin/bash
# session 16 call 4: the tensor-core T = 1 GEMVs had ~11 warps per SM (one 16-row tile each; ncu: achieved
# occupancy 18%, 62% of cycles with no eligible warp). Modes 7 / 8: 8-row tiles (twice the warps, half the work
# each). Kernel checks + timings of the block, SASS of the 8-row gate_up, ncu (warp states, source counters) of
# it, bench/decode main vs mode 7 twice.
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
B=/tmp/B/build; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 120 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"
grep -E "^FAIL|tensor-core|checks" $O/kernels.txt | cut -c1-200
grep -E "timing (gate_up_decode|down_decode|MoE block)" $O/kernels.txt | grep -E "table|tensor|control"
cuobjdump -sass $NEW 2>/dev/null | awk '/Function : _Z22moe_gate_up_tc1_kernelILi4ELi14E/{f=1} f&&/Function : /&&!/ILi4ELi14E/{f=0} f' > $O/sass-gu14.txt; wc -l $O/sass-gu14.txt
grep -cE "LDG" $O/sass-gu14.txt; grep -cE "HMMA" $O/sass-gu14.txt
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section SourceCounters --section MemoryWorkloadAnalysis"
timeout 150 ncu --kernel-name-base mangled -k regex:_Z22moe_gate_up_tc1_kernelILi4ELi14E -c 1 $S $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/ncu-gu14.txt 2>&1; echo "ncu rc=$? ${SECONDS}s"
grep -E "Duration|DRAM Throughput|Issue Slots Busy|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|No Eligible|Executed Ipc A" $O/ncu-gu14.txt
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
{ for i in 1 2; do
  echo "=== main"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== TC mode 7"; LLMR_GPTOSS_MOE_TC=7 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
echo "total ${SECONDS}s"
