#!/bin/bash
# session 27 call 2: where the tensor-core gate_up's time goes. The T = 1 MoE block checked and timed with call 1's
# build (alt/c1) and with this one (the split's digits without float -> int conversions, the epilogue's biases
# loaded before the stage's wait); ncu of the ring kernels' first 8 launches (dp4a and tensor-core forms, plain and
# routed); the tensor-core kernel's SASS.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
for v in c1:/tmp/B/alt/c1/tests/gpu/gptoss_kernels now:$B/tests/gpu/gptoss_kernels; do n=${v%%:*}; b=${v#*:}
  timeout 120 $b --moe-decode-timing > $O/moe-decode-$n.txt 2>&1; echo "$n rc=$? ${SECONDS}s"
  grep -E "^(FAIL|[0-9]+ checks)|tensor-core ring|dp4a ring" $O/moe-decode-$n.txt | grep -E "FAIL|checks|timing" | cut -c1-160
done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
timeout 240 $NCU -k regex:ring_kernel --launch-count 8 --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
  --section InstructionStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
  $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/ncu.txt 2>&1; echo "ncu rc=$? ${SECONDS}s"
grep -E "moe_gate_up_ring_kernel|Duration|Executed Ipc A|Issue Slots Busy|No Eligible|Active Warps Per|Executed Instructions  |Warp Cycles Per Issued|Registers Per" $O/ncu.txt | head -80
CO=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
$CO -sass -fun '_Z23moe_gate_up_ring_kernelILb0ELb1EEvPKfPKiPKhS5_PKtiiffPfii8mr_route' $B/engines/gptoss_cuda/libgptoss_cuda.so > $O/sass-imma.txt 2>&1; echo "sass rc=$? lines $(wc -l < $O/sass-imma.txt)"
$CO -sass -fun '_Z23moe_gate_up_ring_kernelILb0ELb0EEvPKfPKiPKhS5_PKtiiffPfii8mr_route' $B/engines/gptoss_cuda/libgptoss_cuda.so > $O/sass-dp4a.txt 2>&1; echo "sass rc=$? lines $(wc -l < $O/sass-dp4a.txt)"
echo "total ${SECONDS}s"
