#!/bin/bash
# session 22 call 1: where the batched step's experts wait now (the default F16 pre-staged kernel at T = 64:
# ncu warp states, per-instruction stall samples, launch/occupancy, memory), before changing the kernel.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 60 $B/tests/gpu/gptoss_kernels --moe-timing 64 > $O/moe-timing.txt 2>&1; echo "moe-timing rc=$? ${SECONDS}s"
grep -E "T=64|time experts" $O/moe-timing.txt | cut -c1-400
timeout 200 ncu --kernel-name-base demangled -k "regex:stream_kernel<.int.1, .int.2, .int.2, .bool.1, .bool.1>" --launch-skip 1 --launch-count 2 \
  --section WarpStateStats --section SourceCounters --section InstructionStats --section ComputeWorkloadAnalysis \
  --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --section SpeedOfLight --section SchedulerStats \
  -o /tmp/f16 $B/tests/gpu/gptoss_kernels --moe-timing 64 > $O/ncu-log.txt 2>&1; echo "ncu rc=$? ${SECONDS}s"
ncu -i /tmp/f16.ncu-rep --print-details all > $O/ncu-f16.txt 2>&1
ncu -i /tmp/f16.ncu-rep --page source --csv --print-source sass > /tmp/src.csv 2>&1; echo "source rc=$?"
xz -T4 -c /tmp/src.csv > $O/ncu-f16-source.csv.xz
tail -5 $O/ncu-log.txt
echo "total ${SECONDS}s"
