#!/bin/bash
# Session 51, call 2: the small batched steps' down two rows a block (LLMR_GPTOSS_DOWN_PAIR, default 1; 0 the old
# launch, a block a row). Session 50's ncu: a 2-row step's down 20.1 us a layer against one row's 11.7: the one-token
# kernel fills one wave of 3 blocks an SM (80 registers), n rows took n waves. The pair kernel issues row 2p's loads
# into registers and row 2p+1's into shared memory (cp.async), sums the first while the second lands: ceil(n / 2)
# waves. Each row bit for bit its own launch (kernel checks, both settings).
# Predicted: down at 2 rows 20.1 -> ~14 us; 2 / 3 / 4 streams' step rate +4-6%; batch 1 unchanged (its kernels' SASS
# is byte for byte main's).
# Then, if the rows checks pass and 1 beats 0 at 2 streams by > 1%, the full gate on exactly this build.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 120 $B/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1; rc=$?
echo "rows checks rc=$rc: $(tail -1 $O/rows-checks.txt) ${SECONDS}s"; grep -E "^FAIL|pair" $O/rows-checks.txt | cut -c1-220
for round in 1 2 3; do
  for v in 0 1; do
    LLMR_GPTOSS_DOWN_PAIR=$v timeout 60 $B/bench/throughput --engine $EN --model $M20B --streams 2,3,4,5 > /tmp/tp.txt 2>&1
    echo "pair $v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
    { echo "== $v round $round"; cat /tmp/tp.txt; } >> $O/throughput.txt
  done
done | tee $O/ab.txt
echo "ab ${SECONDS}s (streams: out tok/s / step rate)"
timeout 100 tests/gpu/ncu_durations.sh --skip 1500 --count 300 --csv $O/ncu-2rows.csv \
  'qkv_rows|gemv1_rows|attention_rows|moe_router|ring_kernel|down_|lm_head|gemm|rows' -- \
  $B/bench/throughput --engine $EN --model $M20B --streams 2 > $O/ncu-2rows.txt 2>&1
echo "ncu rc=$? ${SECONDS}s"; tr ';' '\n' < $O/ncu-2rows.txt | head -14
win=$(awk '/^pair 0/ { split($0, a, "2: "); split(a[2], b, " / "); s0 += b[2] + 0 } /^pair 1/ { split($0, a, "2: "); split(a[2], b, " / "); s1 += b[2] + 0 } END { print (s1 > 1.01 * s0) ? 1 : 0 }' $O/ab.txt)
echo "2-stream step rate: pair 1 beats 0 by > 1%: $win"
if [ $rc = 0 ] && [ "$win" = 1 ]; then
  timeout $((592 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
  echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
  grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-250
fi
echo "total ${SECONDS}s"
