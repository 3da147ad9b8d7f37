#!/bin/bash
# Prepared in session 46 (no device time was left to run it). Three things, ~480 s:
# 1. read-gate-up-ncu.sh: call 5's two gate_up ncu reports as text (the tiled layout's 0.85 µs a layer).
# 2. finish-bias-raw.diff (alt "fb"): o_proj's last block keeps the router bias raw until it is added. Batch 1;
#    predicted 0 to -0.3% a step (the load is probably hidden behind the partial rows' copy).
# 3. router-group-match.diff (alt "rg"): the batched router's last block ranks pairs by __match_any_sync and scans
#    the experts by a warp, not a 256-iteration loop and a serial one (router-group-model.py checks the tables on
#    the host). Batched steps only; predicted the 64-row router 15.6 -> ~14-15 µs a layer, +0.2-0.5% at 64 streams.
# The build "L": main + both diffs (for the gate); alts "main", "fb", "rg". Package:
#   for v in fb rg; do cp -a MAIN_TREE /tmp/$v; (cd /tmp/$v && git apply .../next/<diff> && make -j2 \
#     build/engines/gptoss_cuda/libgptoss_cuda.so); done; in main apply both, make; then
#   tests/gpu/pack.sh --out .gpu-lead/pkg --alt main:MAIN_TREE_BUILT_BEFORE --alt fb:/tmp/fb --alt rg:/tmp/rg
# and copy this file into the package; carry .gpu-lead/pkg.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt E=engines/gptoss_cuda/libgptoss_cuda.so
tests/gpu/parity/results/s46-lead/next/read-gate-up-ncu.sh > $O/read-gate-up.txt 2>&1
echo "ncu reports ${SECONDS}s"; tail -30 $O/read-gate-up.txt
tests/gpu/decode_ab.sh --log $O/decode-ab.txt L=$EN main=$A/main/$E fb=$A/fb/$E main fb fb main main fb
echo "ab ${SECONDS}s"
for v in main rg rg main; do
  EE=$A/$v/$E
  timeout 60 $B/bench/throughput --engine $EE --model $M20B --streams 8,64 > /tmp/tp.txt 2>&1
  echo "throughput $v rc=$?: $(grep -E '^ +(8|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s streams %s out tok/s, step %s; ", $1, $5, $8}')"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput-ab.txt
done
for v in main rg; do
  echo "ncu router $v: $(timeout 90 tests/gpu/ncu_durations.sh --csv /tmp/n.csv moe_router_decode -- \
    $B/bench/throughput --engine $A/$v/$E --model $M20B --streams 64)"
done
echo "ncu ${SECONDS}s"
timeout $((585 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
