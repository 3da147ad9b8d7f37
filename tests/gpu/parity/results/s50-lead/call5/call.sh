#!/bin/bash
# Session 50, call 5 (checks and an A/B only; no device time is left for a gate): R = 9677bf5 + the small batched
# steps' routing as the batch-1 graph's (gptoss_gemv1_rows_router_finish: o_proj with the router's partial rows and
# each row's finish in its last block; gptoss_moe_routed_gate_up_dp4a_rows1 normalises x itself), so the router launch
# of a 2-4-row step is gone (call 2: 8.3 us a layer). LLMR_GPTOSS_ROWS_ROUTER=0 is the base on the same engine.
# Predicted: a 2-row step -3-5% (router -8.3 us, o_proj +1-3 us a layer), 2 / 3 / 4 streams' step rate +3-5%.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 100 $B/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1; rc=$?
echo "rows checks rc=$rc: $(tail -1 $O/rows-checks.txt) ${SECONDS}s"; grep -E "^FAIL|rows routed" $O/rows-checks.txt | cut -c1-230
for v in base R base R; do
  X=""; [ $v = base ] && X="LLMR_GPTOSS_ROWS_ROUTER=0"
  env $X timeout 40 $B/bench/throughput --engine $EN --model $M20B --streams 2,3,4 > /tmp/tp.txt 2>&1
  echo "$v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done | tee $O/ab.txt
echo "ab ${SECONDS}s"
timeout $((230 - SECONDS)) $B/tests/gpu/gptoss_batching --model $M20B > $O/batching20b.txt 2>&1
echo "batching-20b rc=$?: $(tail -1 $O/batching20b.txt) ${SECONDS}s"; grep -E "^FAIL" $O/batching20b.txt | head -5 | cut -c1-200
