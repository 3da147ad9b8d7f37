#!/bin/bash
# session 27 call 5: the engine with steps 56-57 as defaults (the T = 1 gate_up on integer tensor cores,
# LLMR_GPTOSS_MOE_DP4A=2; the router finish in o_proj's last block, LLMR_GPTOSS_ROUTE_RING=2): the full gate, then
# bench/decode A B A B against the previous defaults (MOE_DP4A=1 ROUTE_RING=1) and bench/throughput once.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 430 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1
for r in 1 2; do
  LLMR_GPTOSS_MOE_DP4A=1 LLMR_GPTOSS_ROUTE_RING=1 timeout 60 $B/bench/decode --model /tmp/m20b > $O/decode-old-r$r.txt 2>&1; echo "decode previous defaults run $r rc=$? ${SECONDS}s"
  grep -E "^ +[0-9]+ " $O/decode-old-r$r.txt
  timeout 60 $B/bench/decode --model /tmp/m20b > $O/decode-new-r$r.txt 2>&1; echo "decode new defaults run $r rc=$? ${SECONDS}s"
  grep -E "^ +[0-9]+ " $O/decode-new-r$r.txt
done
timeout 100 $B/bench/throughput --model /tmp/m20b --streams 1,8,64 > $O/tp.txt 2>&1; echo "throughput rc=$? ${SECONDS}s"
grep -E "^ +[0-9]+ " $O/tp.txt | head -4
echo "total ${SECONDS}s"
