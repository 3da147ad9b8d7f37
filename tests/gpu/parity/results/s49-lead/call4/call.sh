#!/bin/bash
# Session 49, call 4: the landing candidate = main (2730119) + per-row-to-5.diff: the batched steps' experts row by row
# (now one launch each for all rows) up to 5 rows and on the tensor-core kernel from 6 (LLMR_GPTOSS_BATCH_MOE_PER_ROW 3 ->
# 5, LLMR_GPTOSS_MOE_MMA_MIN_ROWS 4 -> 6). Call 3: a 4-row step 4.71-4.73 -> 3.82-3.83 ms, 5.6-row steps even.
# Predicted: 4 / 5 streams' step rate +15-20% / +5-10%, 6 and more unchanged. "old" = the same build with the old
# thresholds by environment. Then the full gate on this build.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
for v in new old new old; do
  X=""; [ $v = old ] && X="LLMR_GPTOSS_MOE_MMA_MIN_ROWS=4 LLMR_GPTOSS_BATCH_MOE_PER_ROW=3"
  env $X timeout 60 $B/bench/throughput --engine $EN --model $M20B --streams 4,5,8 > /tmp/tp-$v.txt 2>&1
  echo "$v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp-$v.txt | awk '{ printf "%s streams %s out, step rate %s; ", $1, $5, $8 }')"
  { echo "== $v"; cat /tmp/tp-$v.txt; } >> $O/throughput.txt
done | tee $O/threshold-ab.txt
echo "tp ${SECONDS}s"
timeout $((560 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-250
echo "total ${SECONDS}s"
