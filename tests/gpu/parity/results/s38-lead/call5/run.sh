#!/bin/bash
# Session 38 call 5 (H200): the e5m2 expert copy (session 37's prepared diff, measured in call 1) in auto mode by default
# (LLMR_GPTOSS_MOE_E5=2; the batched launches from 32 rows): the standing figures with it (bench/decode, bench/throughput
# at 1 / 8 / 32 / 64 streams, bench/prefill), then the full gate on this build and, beside it, the self-test, parity and
# batching without the expert cache. Predicted: the 64-stream step rate +5% (call 1: 6,755 -> 7,097 tok/s), prompts
# below 1,024 tokens ~9% faster, 4k with the cache unchanged (~87-88 ms), batch-1 unchanged, VRAM ~78 GB.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 --tokens 64 > $O/decode.txt 2>&1
echo "decode rc=$?: $(grep -E '^ +(128|1024) ' $O/decode.txt | awk '{printf "%s %s (%s) | ", $1, $3, $NF}')"
timeout 90 $B/bench/throughput --model /tmp/m20b --streams 1,8,32,64 > $O/throughput.txt 2>&1
echo "throughput rc=$?: $(grep -E '^ +(1|8|32|64) +[0-9]+ +[0-9]+ ' $O/throughput.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')"
grep -E "e5m2|VRAM" $O/throughput.txt | cut -c1-160 | head -3
timeout 60 $B/bench/prefill --model /tmp/m20b --lengths 256,512,1024,2048,4096 --reps 3 > $O/prefill.txt 2>&1
echo "prefill rc=$?: $(grep -E '^ +[0-9]+ ' $O/prefill.txt | awk '{printf "%s %s | ", $1, $2}') ${SECONDS}s"
LLMR_GPTOSS_EXPERT_CACHE=0 timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
G0=$!
timeout 470 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $G0; echo "gate without the cache rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-nocache.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt | grep -v "FAIL otherwise" | head -8 | cut -c1-200
grep -h -o "e5m2 expert copy[^(]*" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt 2>/dev/null | sort | uniq -c | head -5
echo "total ${SECONDS}s"
