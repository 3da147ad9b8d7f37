#!/bin/bash
# Session 51, call 7: where the small steps' down and q/k/v warps stall, by instruction (ncu source counters with
# warp-stall sampling, real clocks, caches as left), on main 9a6b425: the rows down at 2 rows and qkv_rows<2> (a 2-stream
# run, launches from its 2-row steps), and the one-token down (bench/decode). For the next session's reading: calls
# 2-6 ruled out the loads' timing and the instruction count as down's bound.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
prof() { # NAME REGEX SKIP CMD...
  local n=$1 re=$2 sk=$3; shift 3
  timeout 150 ncu --clock-control none --cache-control none --section SourceCounters --section WarpStateStats \
    --section SpeedOfLight --section SchedulerStats -k "regex:$re" --launch-skip "$sk" -c 1 -o /tmp/$n "$@" > $O/$n.log 2>&1
  echo "$n rc=$? ${SECONDS}s"
  ncu --import /tmp/$n.ncu-rep --page details > $O/$n-details.txt 2>&1
  ncu --import /tmp/$n.ncu-rep --page source --csv --print-source sass > $O/$n-sass.csv 2>&1
  ncu --import /tmp/$n.ncu-rep --page source --csv --print-source cuda > $O/$n-cuda.csv 2>&1
  ls -la $O/$n-*.csv | awk '{ print $5, $9 }'
}
prof down2 moe_down_decode 1500 $B/bench/throughput --engine $EN --model $M20B --streams 2
prof qkv2 qkv_rows 1500 $B/bench/throughput --engine $EN --model $M20B --streams 2
prof down1 moe_down_decode 500 $B/bench/decode --engine $EN --model $M20B --contexts 128 --tokens 64
head -3 $O/down2-sass.csv | cut -c1-600
echo "total ${SECONDS}s"
