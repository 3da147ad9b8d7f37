#!/bin/bash
# session 17 call 5: ncu of the ring gate_up (issue 10 step 18) in --moe-decode-timing: launch 160 of the ring kernel
# is slot 13 (its arithmetic alone), launch 120 slot 11 (the whole kernel): warp states, scheduler, pipes, and
# per-SASS-instruction stall samples of the arithmetic-alone launch.
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
B=/tmp/B/build; SECONDS=0
K=regex:moe_gate_up_ring
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats --section Occupancy --section LaunchStats"
timeout 200 ncu -k $K --launch-skip 160 --launch-count 1 $S --page details --print-details all $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/ncu-arith.txt 2>&1; echo "ncu arith rc=$? ${SECONDS}s"
timeout 150 ncu -k $K --launch-skip 120 --launch-count 1 $S --page details $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/ncu-whole.txt 2>&1; echo "ncu whole rc=$? ${SECONDS}s"
timeout 200 ncu -k $K --launch-skip 160 --launch-count 1 --section SourceCounters --section WarpStateStats --page source --print-source sass --csv $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/ncu-sass.csv 2>&1; echo "ncu sass rc=$? ${SECONDS}s"
grep -E "Duration|Executed Ipc|Issue Slots Busy|Warp Cycles Per Issued|Stall|Achieved Active Warps|Registers Per|Theoretical Occ|No Eligible|Active Warps Per" $O/ncu-arith.txt | head -40
ls -la $O; gzip -9 $O/ncu-sass.csv; echo "total ${SECONDS}s"
