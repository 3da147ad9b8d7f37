#!/bin/bash
# Session 55 call 3 (call 2 again after its checks asked the routed rows beyond the 4 rows they take): the gate_up that takes each expert two rows share once (gptoss_moe_route_gate_up_pairs,
# LLMR_GPTOSS_MOE_PAIRS, off by default in this build). First its kernel checks (--rows-checks: the rows launches
# against a launch a row, bit for bit, now with the pairs form at 2 (odd rows = row 0), 3 and 4 (odd rows = row 0)
# rows; and the router launch's form at 6 and 8 (odd rows = row 0)); only if every check passes, the A/B: base (off) against p2 (from 2 rows) and c10 (p2 with a two-row tile
# costing 10 eighths instead of 9) at 2-6 streams, then p2 with the per-row experts up to 8 rows at 7-8 streams.
# Predicted (uniform routing; a two-row tile ~1.1 one-row ones; the gate_up ~30-50% of a 2-6-row step): step rate
# +0-2% at 2 streams, +2-4% at 3-4, +4-9% at 5-6.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 150 $B/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1
echo "rows-checks rc=$? ${SECONDS}s"
grep -E "^FAIL|shared expert|checks," $O/rows-checks.txt | cut -c1-240
if grep -q "^FAIL" $O/rows-checks.txt || ! grep -q "checks, 0 failed" $O/rows-checks.txt; then
  echo "checks failed: no A/B"; exit 0
fi
P2=LLMR_GPTOSS_MOE_PAIRS=2
timeout 200 tests/gpu/throughput_ab.sh --streams 2,3,4,5,6 --log $O/tp-pairs.txt base=$EN p2=$EN:$P2 \
  c10=$EN:$P2:LLMR_GPTOSS_MOE_PAIR_COST=10 base p2 c10 c10 p2 base base p2 > $O/ab-pairs.txt 2>&1
echo "pairs A/B rc=$? ${SECONDS}s"; sed -n '/^mean step/,$p' $O/ab-pairs.txt
timeout 100 tests/gpu/throughput_ab.sh --streams 7,8 --log $O/tp-pr8.txt base=$EN \
  pr8=$EN:$P2:LLMR_GPTOSS_BATCH_MOE_PER_ROW=8:LLMR_GPTOSS_MOE_MMA_MIN_ROWS=9 base pr8 pr8 base > $O/ab-pr8.txt 2>&1
echo "pr8 A/B rc=$? ${SECONDS}s"; sed -n '/^mean step/,$p' $O/ab-pr8.txt
echo "total ${SECONDS}s"
