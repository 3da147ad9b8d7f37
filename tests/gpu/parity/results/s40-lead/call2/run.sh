#!/bin/bash
# session 40 call 2: where the time goes: batch-1 (LLMR_GPTOSS_PROFILE=1, per category, no graph) and batched steps
# by row bucket (LLMR_GPTOSS_BATCH_PROFILE=1) at 8 and 64 streams; then ncu durations at real clocks of a window of
# the 8-stream run's kernels.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
LLMR_GPTOSS_PROFILE=1 timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 --tokens 64 > $O/decode-prof.txt 2>&1
echo "decode prof rc=$? ${SECONDS}s"; grep -A30 "profile:" $O/decode-prof.txt | head -40
LLMR_GPTOSS_BATCH_PROFILE=1 timeout 90 $B/bench/throughput --model /tmp/m20b --streams 8,64 > $O/tp-prof.txt 2>&1
echo "tp prof rc=$? ${SECONDS}s"; grep -vE "^gptoss_cuda: (expert|experts|stacked|e5m2|warm|loaded)" $O/tp-prof.txt | tail -60
timeout 300 ncu --clock-control none --cache-control none --launch-skip 15000 --launch-count 5000 --csv \
  --metrics gpu__time_duration.sum $B/bench/throughput --model /tmp/m20b --streams 8 > /tmp/dur.csv 2>&1
echo "ncu rc=$? ${SECONDS}s"; grep -c gpu__time_duration /tmp/dur.csv; xz -T8 -c /tmp/dur.csv > $O/ncu-dur-8.csv.xz
echo "total ${SECONDS}s"
