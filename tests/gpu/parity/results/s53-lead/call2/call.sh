#!/bin/bash
# Session 53, call 2: (1) the batching step (tiny and 20b) on exactly main with the new two-rows-lone check and without
# the rows graph (call 1 ran it with the graph); (2) where the batched experts' forms cross over now: --moe-timing at
# 12-48 rows; (3) the e5m2 copy's row threshold (LLMR_GPTOSS_MOE_E5_MIN_ROWS, 32 since session 38) A B C A B C at 16,
# 24 and 48 streams, with the per-bucket step times.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 200 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps batching > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "beside request 1" /tmp/g/gate/*.txt | cut -c1-200
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -4 | cut -c1-250
timeout 90 $B/tests/gpu/gptoss_kernels --moe-timing 12 16 24 32 48 > $O/moe-timing.txt 2>&1
echo "moe-timing rc=$? ${SECONDS}s"
for v in 32 16 24 32 16 24; do
  [ $SECONDS -gt 540 ] && break
  LLMR_GPTOSS_MOE_E5_MIN_ROWS=$v timeout 60 $B/bench/throughput --engine $EN --model $M20B --streams 16,24,48 > /tmp/tp.txt 2>&1
  echo "e5_min_rows $v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
  { echo "== e5_min_rows $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done | tee $O/ab.txt
echo "total ${SECONDS}s"
