#!/bin/bash
# Session 39 call 3 (H200): d07c5db, the e5m2 copy's launches with experts of 8 pairs or fewer on the MXFP4 tiles
# (LLMR_GPTOSS_MOE_E5_MIX=8 by default; calls 1-2: the 64-stream step rate +3%): the full gate on this build and,
# beside it, the self-test, parity and batching without the expert cache; then the standing figures where time is left.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
LLMR_GPTOSS_EXPERT_CACHE=0 timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
G0=$!
timeout 470 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $G0; echo "gate without the cache rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-nocache.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt | grep -v "FAIL otherwise" | head -8 | cut -c1-200
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1
if [ $SECONDS -lt 470 ]; then
timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 --tokens 64 > $O/decode.txt 2>&1
echo "decode rc=$?: $(grep -E '^ +(128|1024) ' $O/decode.txt | awk '{printf "%s %s (%s) | ", $1, $3, $NF}')"
timeout 70 $B/bench/throughput --model /tmp/m20b --streams 1,8,32,64 > $O/throughput.txt 2>&1
echo "throughput rc=$?: $(grep -E '^ +(1|8|32|64) +[0-9]+ +[0-9]+ ' $O/throughput.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')"
grep -E "e5m2|VRAM" $O/throughput.txt | cut -c1-160 | head -3
fi
echo "total ${SECONDS}s"
