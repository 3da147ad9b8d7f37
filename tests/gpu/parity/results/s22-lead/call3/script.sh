#!/bin/bash
# session 22 call 3: where a batched step's time goes at real clocks: ncu durations (clocks and caches left as they
# are) of 40,000 consecutive kernels of bench/throughput at 64 streams, to compare the kernels' sum per step with
# the step's wall time (the launch gaps) and to see each small kernel's real cost. Then the same bench without ncu.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 100 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/tp.txt 2>&1; echo "tp rc=$? ${SECONDS}s"
grep -E "^ +64 +[0-9]+ |^ +(32-63|64) " $O/tp.txt
timeout 420 ncu --clock-control none --cache-control none --launch-skip 60000 --launch-count 40000 --csv \
  --metrics gpu__time_duration.sum $B/bench/throughput --model /tmp/m20b --streams 64 > /tmp/dur.csv 2>&1
echo "ncu rc=$? ${SECONDS}s"; grep -c gpu__time_duration /tmp/dur.csv; xz -T8 -c /tmp/dur.csv > $O/ncu-durations.csv.xz
echo "total ${SECONDS}s"
