#!/bin/bash
# Session 55 call 6. Call 5 put the pairs kernel's extra 8-13 us in both its copies (+16% at 6 rows) and its
# arithmetic (+18-24%) alone, not in its split: its contiguous ranges over all the tiles. Now it plans as the rows
# launch does: the passes in groups (one row's, or one pair of rows'), CTAs to each group by cost (a two-row tile 10
# eighths, call 5's 1.26), each CTA one split and its stages strided over its group's tiles. Checks, the launches timed
# alone, then base / p2 (from 2 rows) / p4 (from 4 rows) at 2-6 streams. Predicted: the pairs kernel without pairs
# within +-3% of the rows launch; random routing at 4 / 6 rows -10-15%; step rate +0-2% at 2 streams, +3-6% at 4-6.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 150 $B/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1
echo "rows-checks rc=$? ${SECONDS}s"
grep -E "^FAIL|checks,|timing gate_up" $O/rows-checks.txt | cut -c1-260
if grep -q "^FAIL" $O/rows-checks.txt || ! grep -q "checks, 0 failed" $O/rows-checks.txt; then
  echo "checks failed: no A/B"; exit 0
fi
timeout 150 tests/gpu/throughput_ab.sh --streams 2,3,4,5,6 --log $O/tp-pairs.txt base=$EN p2=$EN:LLMR_GPTOSS_MOE_PAIRS=2 \
  p4=$EN:LLMR_GPTOSS_MOE_PAIRS=4 base p2 p4 p4 p2 base > $O/ab-pairs.txt 2>&1
echo "pairs A/B rc=$? ${SECONDS}s"; sed -n '/^mean step/,$p' $O/ab-pairs.txt
echo "total ${SECONDS}s"
