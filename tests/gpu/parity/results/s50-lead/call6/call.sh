#!/bin/bash
# Session 50, call 6 (checks and an A/B only): call 5's engine plus a second routed form for the small batched steps,
# LLMR_GPTOSS_ROWS_ROUTER=1: o_proj writes each row's router partial rows (gptoss_gemv1_rows_router, no finish) and
# every gate_up CTA finishes its own row from them (ROUTE 4, gptoss_moe_route_gate_up_dp4a_rows1), so the rows finish
# in parallel instead of one after another in o_proj's last block (call 5's form, =2: -2.6% / -2.8% / -5.4%).
# Default 0 (the router launch). Predicted for =1: 2 / 3 / 4 streams 0 to +3%.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 60 $B/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1; rc=$?
echo "rows checks rc=$rc: $(tail -1 $O/rows-checks.txt) ${SECONDS}s"; grep -E "^FAIL|rows routed \(finish in the gate" $O/rows-checks.txt | cut -c1-150
for v in 0 1 0 1; do
  LLMR_GPTOSS_ROWS_ROUTER=$v timeout 25 $B/bench/throughput --engine $EN --model $M20B --streams 2,3,4 > /tmp/tp.txt 2>&1
  echo "rows_router $v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done | tee $O/ab.txt
echo "total ${SECONDS}s"
