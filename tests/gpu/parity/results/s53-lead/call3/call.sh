#!/bin/bash
# Session 53, call 3: the e5m2 copy's row threshold. The build's default is 48 rows (LLMR_GPTOSS_MOE_E5_MIN_ROWS; 32
# before): A B C three times over (32 / 48 / 64, balanced order) at 32, 48 and 64 streams, with the per-bucket step
# times; --moe-timing at 40 and 56 rows for the crossover; then the full gate on exactly this build and, if time is
# left, the standing step rates.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 40 $B/tests/gpu/gptoss_kernels --moe-timing 40 56 > $O/moe-timing.txt 2>&1
echo "moe-timing rc=$? ${SECONDS}s"
for v in 32 48 64 64 48 32 32 48 64; do
  [ $SECONDS -gt 200 ] && break
  LLMR_GPTOSS_MOE_E5_MIN_ROWS=$v timeout 60 $B/bench/throughput --engine $EN --model $M20B --streams 32,48,64 > /tmp/tp.txt 2>&1
  echo "e5_min_rows $v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
  { echo "== e5_min_rows $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done | tee $O/ab.txt
echo "ab ${SECONDS}s"
timeout $((585 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -6 | cut -c1-250
left=$((585 - SECONDS))
[ $left -gt 35 ] && timeout $((left - 3)) $B/bench/throughput --engine $EN --model $M20B --streams 1,2,3,4,8,32,64 > $O/standing.txt 2>&1 &&
  echo "standing: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' $O/standing.txt | awk '{ printf "%s: %s / %s (%s); ", $1, $5, $8, $11 }')"
echo "total ${SECONDS}s"
