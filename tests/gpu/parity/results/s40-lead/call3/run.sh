#!/bin/bash
# session 40 call 3: (a) the small-row paths' thresholds, env-only A/B on bench/throughput 8 and 64 streams with the
# per-part profile; (b) ncu durations at real clocks of a window of the 64-stream run; (c) ncu full (with the source
# page) of the MXFP4 tiles' streaming launch at the 8-stream run's steps.
O=$OUT; mkdir -p /tmp/B /tmp/cache
[ -x /tmp/B/build/bin/llmr-mkmodel ] || { xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache; }
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
[ -f /tmp/m20b/config.json ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
run() { # name env...
  local name=$1; shift
  env LLMR_GPTOSS_BATCH_PROFILE=1 "$@" timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8,64 > /tmp/tp.txt 2>&1
  local rc=$?
  { echo "== $name ($*)"; cat /tmp/tp.txt; } >> $O/ab.txt
  echo "$name rc=$rc ${SECONDS}s: $(grep -E '^ +(8|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s step %s (%s) ", $1, $8, $NF}')"
  awk '/^8 streams/{f=1} /^64 streams/{f=0} f && /^ +(2-3|4-7|8-15) /{printf "   8s %s: %s | %s\n", $1, $4, substr($0, 60)}' /tmp/tp.txt
}
for pass in 1 2; do
  run default
  run qkv0 LLMR_GPTOSS_BATCH_QKV_ROWS=0
  run qkv4 LLMR_GPTOSS_BATCH_QKV_ROWS=4
  run e5min8 LLMR_GPTOSS_MOE_E5_MIN_ROWS=8
  run e5min16 LLMR_GPTOSS_MOE_E5_MIN_ROWS=16
  run e5min8mix4 LLMR_GPTOSS_MOE_E5_MIN_ROWS=8 LLMR_GPTOSS_MOE_E5_MIX=4
  run tcmin16 LLMR_GPTOSS_BATCH_TC_MIN=16
  run mmamin2 LLMR_GPTOSS_MOE_MMA_MIN_ROWS=2
done
timeout 150 ncu --clock-control none --cache-control none --launch-skip 30000 --launch-count 5000 --csv \
  --metrics gpu__time_duration.sum $B/bench/throughput --model /tmp/m20b --streams 64 > /tmp/dur.csv 2>&1
echo "ncu durations 64 rc=$? ${SECONDS}s"; grep -c gpu__time_duration /tmp/dur.csv; xz -T8 -c /tmp/dur.csv > $O/ncu-dur-64.csv.xz
timeout 150 ncu --set full --import-source no -k "regex:mxfp4_mma_stream_kernel" --launch-skip 400 -c 2 -o /tmp/rep8 \
  $B/bench/throughput --model /tmp/m20b --streams 8 > /tmp/ncu8.log 2>&1
echo "ncu full 8 rc=$? ${SECONDS}s"; tail -3 /tmp/ncu8.log | cut -c1-200
ncu -i /tmp/rep8.ncu-rep --print-details all > $O/ncu-stream-8.txt 2>&1
ncu -i /tmp/rep8.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $O/source-stream-8.csv.xz
grep -E "^  [a-z_]|Duration|DRAM Throughput|L1: Data Pipe Lsu Wavefronts|Achieved Occupancy|Issue Slots Busy|No Eligible|Registers Per|Waves Per SM" $O/ncu-stream-8.txt | cut -c1-150 | sort -u | head -30
echo "total ${SECONDS}s"
