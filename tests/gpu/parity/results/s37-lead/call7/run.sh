#!/bin/bash
# Session 37 call 7 (H200): the standing of main as landed (the stacked dense weights kept from load): bench/load,
# bench/decode, bench/throughput at 1 / 8 / 32 / 64 streams and bench/prefill, the defaults (expert cache on).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 90 $B/bench/load --model /tmp/m20b > $O/load.txt 2>&1; echo "load rc=$? ${SECONDS}s"; tail -6 $O/load.txt | cut -c1-160
timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 --tokens 64 > $O/decode.txt 2>&1
echo "decode rc=$?: $(grep -E '^ +[0-9]+ ' $O/decode.txt | awk '{printf "%s: %s tok/s %s | ", $1, $3, $NF}') ${SECONDS}s"
timeout 90 $B/bench/throughput --model /tmp/m20b --streams 1,8,32,64 > $O/throughput.txt 2>&1
echo "throughput rc=$? ${SECONDS}s"; grep -E '^ +(1|8|32|64) +[0-9]+ +[0-9]+ |VRAM' $O/throughput.txt | cut -c1-150
timeout 60 $B/bench/prefill --model /tmp/m20b --lengths 256,512,1024,2048,4096 --reps 3 > $O/prefill.txt 2>&1
echo "prefill rc=$?: $(grep -E '^ +[0-9]+ ' $O/prefill.txt | awk '{printf "%s %s ms %s GB | ", $1, $2, $6}') ${SECONDS}s"
echo "total ${SECONDS}s"
