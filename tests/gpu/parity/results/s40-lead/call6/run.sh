#!/bin/bash
# session 40 call 6: the landing build: BATCH_QKV_ROWS 4, BATCH_TC_MIN 5 (2 parts), gptoss_batching's NT_ROUTER 3e-3 -> 1e-2
# (calls 4-5: the step schedules' router noise 2.4-3.6e-3 once 5-8-row steps take the tensor-core q/k/v and o_proj).
# The standing at 1/8/32/64 streams, then the full gate and beside it selftest parity batching without the cache.
O=$OUT; rm -rf /tmp/B; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
[ -f /tmp/m20b/config.json ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
LLMR_GPTOSS_BATCH_PROFILE=1 timeout 60 $B/bench/throughput --model /tmp/m20b --streams 1,8,32,64 > $O/throughput.txt 2>&1
echo "throughput rc=$? ${SECONDS}s: $(grep -E '^ +(1|8|32|64) +[0-9]+ +[0-9]+ ' $O/throughput.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')"
LLMR_GPTOSS_EXPERT_CACHE=0 timeout $((585 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
G0=$!
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "selftest parity batching serving" > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $G0; echo "gate without the cache rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-nocache.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
grep -h "step schedule.*batched steps" /tmp/g/gate/batching20b.txt | cut -c1-400
mkdir -p $O/g; cp /tmp/g/gate/batching20b.txt /tmp/g/gate/batching.txt $O/g/ 2>/dev/null
echo "total ${SECONDS}s"
