#!/bin/bash
# session 21 call 10: packed prefill on by default (call 9: 64 streams +5%, batching and serving gates pass with it);
# the gate's selftest and parity steps on this build (gptoss_forward is now gptoss_forward_segments with one segment),
# then 64 streams once more.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 300 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "selftest parity" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; mkdir -p $O/gate; cp /tmp/g/gate/*.txt $O/gate/ 2>/dev/null
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 60 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/tp.txt 2>&1; echo "tp rc=$? ${SECONDS}s"
grep -E "^ +64 +[0-9]+ +[0-9]+ |streams, wall" $O/tp.txt | cut -c1-160
echo "total ${SECONDS}s"
