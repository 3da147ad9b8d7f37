#!/bin/bash
# session 27 call 6: the engine as it lands (call 5's, plus the review's refactor: every form of the router finish
# sums through moe_route.cuh's router_partials_vw / router_finish_warp): the gate's kernels, self-test, parity and
# batching steps, then bench/decode twice for the standing.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g --steps "kernels selftest parity batching" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head
grep -hE "router split|o_proj's last block|ring gate_up" /tmp/g/gate/kernels.txt 2>/dev/null | cut -c1-200 | head -12
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1
for r in 1 2; do timeout 60 $B/bench/decode --model /tmp/m20b > $O/decode-r$r.txt 2>&1; echo "decode run $r rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ " $O/decode-r$r.txt; done
echo "total ${SECONDS}s"
