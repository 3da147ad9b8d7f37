#!/bin/bash
# Session 55 call 4. Call 3: the pairs gate_up bit for bit (79 checks) but 2-6-row steps +2-6% slower. Suspects: its
# start (warp 0 read the n tables with 2 x 4n L2 loads one after another, ~3-7 us; 64-bit divisions in the range), now
# one parallel read into shared memory and 32-bit arithmetic. This call: the checks again, then the gate_up launches
# timed alone at 2-6 rows (random and odd rows = row 0): the rows launch, the pairs kernel with no two-row passes (its
# scheduling alone), with them; then base vs p2 at 2-6 streams. Predicted: the pairs kernel without pairs within
# +-3% of the rows launch; with all four experts shared at 2 rows ~0.55-0.6x.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 150 $B/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1
echo "rows-checks rc=$? ${SECONDS}s"
grep -E "^FAIL|shared expert|checks,|timing gate_up" $O/rows-checks.txt | cut -c1-260
if grep -q "^FAIL" $O/rows-checks.txt || ! grep -q "checks, 0 failed" $O/rows-checks.txt; then
  echo "checks failed: no A/B"; exit 0
fi
timeout 150 tests/gpu/throughput_ab.sh --streams 2,3,4,5,6 --log $O/tp-pairs.txt base=$EN p2=$EN:LLMR_GPTOSS_MOE_PAIRS=2 \
  base p2 p2 base base p2 > $O/ab-pairs.txt 2>&1
echo "pairs A/B rc=$? ${SECONDS}s"; sed -n '/^mean step/,$p' $O/ab-pairs.txt
echo "total ${SECONDS}s"
