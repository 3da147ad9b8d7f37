#!/bin/bash
# Prepared in session 50 for the next session: the landing gate of next/rows-router-ring.diff.
# What the diff does: the small batched steps' (2-4 rows) router rides in o_proj and each gate_up CTA finishes its own
# row. gptoss_gemv1_rows_router writes each row's router partial rows; ROUTE 4 of the ring,
# gptoss_moe_route_gate_up_dp4a_rows1, does the finish. The router launch is gone, and each row's MoE block is bit
# for bit its lone (batch-1 graph) result.
#   LLMR_GPTOSS_ROWS_ROUTER: 1 the default; 2 o_proj's last block finishes every row (call 5's form, slower); 0 the
#   router launch.
# Measured in session 50 call 6 on main 2e19f89's engine + the diff at default 0 (0 / 1 A B A B):
#   2 streams 766.0 / 762.8 -> 787.6 / 787.8; 3 streams 925.4 / 925.4 -> 956.9 / 949.4;
#   4 streams 1,055.9 / 1,058.7 -> 1,090.2 / 1,096.0 (+3.0-3.4%).
#   Kernel checks 35/35 (--rows-checks, the 12 new ones included); gptoss_batching on the 20b 19/19 (call 5, form 2).
# Not run yet: the full gate. Session 50 had no device time left for it.
# Build: git apply the diff on main; make; tests/gpu/pack.sh --build build --out .gpu-lead/pkg (no alt: =0 is the base).
# Predicted: the gate passes; 2 / 3 / 4 streams +3% again; batch 1 unchanged (its graph's kernels' PTX is main's).
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
for v in 0 1 0 1; do
  LLMR_GPTOSS_ROWS_ROUTER=$v timeout 30 $B/bench/throughput --engine $EN --model $M20B --streams 2,3,4 > /tmp/tp.txt 2>&1
  echo "rows_router $v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done | tee $O/ab.txt
echo "ab ${SECONDS}s"
timeout $((592 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-250
echo "total ${SECONDS}s"
