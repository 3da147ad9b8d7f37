#!/bin/bash
# Session 51, call 5: the standing figures on exactly main 9a6b425 (call 1's change landed): batch 1 (bench/decode at
# 128 / 1,024 keys, twice) and 1 / 2 / 4 / 8 / 32 / 64 streams (bench/throughput, twice).
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 100 tests/gpu/decode_ab.sh --log $O/decode.txt main=$EN main main | tee $O/decode-summary.txt
for round in 1 2; do
  timeout 150 $B/bench/throughput --engine $EN --model $M20B --streams 1,2,4,8,32,64 > /tmp/st.txt 2>&1
  echo "round $round rc=$?: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/st.txt | awk '{ printf "%s: %s out, step %s (%s); ", $1, $5, $8, $11 }') ${SECONDS}s"
  { echo "== round $round"; cat /tmp/st.txt; } >> $O/standing.txt
done
echo "total ${SECONDS}s"
