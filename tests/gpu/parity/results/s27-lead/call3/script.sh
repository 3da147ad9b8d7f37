#!/bin/bash
# session 27 call 3: the router finish in o_proj's last block (LLMR_GPTOSS_ROUTE_RING=2, step 57): the T = 1 MoE
# checks (its bit-for-bit checks against gemv1_router + router_finish and finish + ring) and timings; bench/decode
# A B A B A B against the routed gate_up (ROUTE_RING=1, the default), and once with the tensor-core consumers too;
# the gate's parity and batching steps with it on.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 120 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe-decode.txt 2>&1; echo "moe-decode rc=$? ${SECONDS}s"
grep -E "^(FAIL|[0-9]+ checks)|o_proj|timing gate_up_decode, (dp4a|tensor-core) ring T|timing MoE block fused, (dp4a|tensor)" $O/moe-decode.txt | cut -c1-230
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1
for r in 1 2 3; do for f in 1 2; do
  LLMR_GPTOSS_ROUTE_RING=$f timeout 60 $B/bench/decode --model /tmp/m20b > $O/decode-rr$f-r$r.txt 2>&1; echo "decode route_ring $f run $r rc=$? ${SECONDS}s"
  grep -E "^ +[0-9]+ " $O/decode-rr$f-r$r.txt | head -4
done; done
LLMR_GPTOSS_ROUTE_RING=2 LLMR_GPTOSS_MOE_DP4A=2 timeout 60 $B/bench/decode --model /tmp/m20b > $O/decode-rr2-imma.txt 2>&1; echo "decode route_ring 2 + tensor-core rc=$? ${SECONDS}s"
grep -E "^ +[0-9]+ " $O/decode-rr2-imma.txt | head -4
LLMR_GPTOSS_ROUTE_RING=2 timeout 300 tests/gpu/gate.sh --build $B --out /tmp/g --steps "parity batching" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head
echo "total ${SECONDS}s"
