#!/bin/bash
# session 23 call 5: ncu of gptoss_mxfp4_mma_wgmma (step 45) at T = 64 (gptoss_kernels --moe-timing 64): where its warps
# wait, its pipes, its memory; the streaming kernel as measured in session 22 call 1.
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
S="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio,regex:sm__pipe_.*_cycles_active\\.avg\\.pct_of_peak_sustained_active --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section InstructionStats"
timeout 280 ncu --clock-control none $S --kernel-name regex:mxfp4_mma_wgmma_kernel --launch-skip 4 --launch-count 2 \
  $B/tests/gpu/gptoss_kernels --moe-timing 64 > $O/ncu-wgmma.txt 2>&1; echo "ncu rc=$? ${SECONDS}s"
for f in $O/ncu-wgmma.txt; do echo "== $f"; grep -E "stalled_|pipe_|Duration|Registers Per|Achieved Occupancy|Issued Ipc|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Stall|Memory Throughput|DRAM Throughput|L1/TEX Hit|Executed Ipc|Theoretical Occ|Block Limit|One or More" $f | grep -vE " 0(\.0+)?$| 0\.0[0-9]$" | head -90; done
