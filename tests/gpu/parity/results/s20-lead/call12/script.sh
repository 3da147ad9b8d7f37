#!/bin/bash
# session 20 call 12: why gptoss_qkv_rows takes ~4 us per row (call 11): ncu warp states and per-instruction source
# counters of one qkv_rows_kernel<8> launch inside bench/throughput at 8 streams, and the kernel's SASS.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 200 ncu -k "regex:qkv_rows_kernel" --launch-skip 1000 --launch-count 1 --section WarpStateStats --section SourceCounters \
  --section InstructionStats --section Occupancy --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \
  -o /tmp/qr $B/bench/throughput --model /tmp/m20b --streams 8 > $O/ncu-log.txt 2>&1; echo "ncu rc=$? ${SECONDS}s"
ncu -i /tmp/qr.ncu-rep --print-details all > $O/ncu-qkv-rows.txt 2>&1
ncu -i /tmp/qr.ncu-rep --page source --csv --print-source sass > $O/ncu-qkv-rows-source.csv 2>&1; echo "source rc=$?"
grep -E "Duration|Kernel Name|qkv_rows_kernel<|Executed Ipc|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Achieved Occupancy|Registers Per|Block Limit" $O/ncu-qkv-rows.txt | head -20
echo "total ${SECONDS}s"
