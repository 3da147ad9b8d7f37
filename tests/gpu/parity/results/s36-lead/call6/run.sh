#!/bin/bash
# Session 36 call 6 (H200): the standing of main as landed (nosync-counts, mixed-tiles, the one-read split):
# bench/prefill and bench/throughput (64 streams) with the expert cache (the default) and without, bench/decode.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for c in 2 0; do
  LLMR_GPTOSS_EXPERT_CACHE=$c timeout 60 $B/bench/prefill --model /tmp/m20b --lengths 256,512,768,1024,2048,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "prefill cache=$c rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s ms %s GB | ", $1, $2, $6}')"
  { echo "== cache $c"; cat /tmp/pf.txt; } >> $O/prefill.txt
  LLMR_GPTOSS_EXPERT_CACHE=$c timeout 60 $B/bench/throughput --model /tmp/m20b --streams 64 > /tmp/tp.txt 2>&1
  echo "throughput cache=$c rc=$?: $(grep -E '^ +64 ' /tmp/tp.txt | head -1)"
  { echo "== cache $c"; cat /tmp/tp.txt; } >> $O/throughput.txt
done
timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 --tokens 64 > $O/decode.txt 2>&1
echo "decode rc=$?: $(grep -E '^ +[0-9]+ ' $O/decode.txt | awk '{printf "%s: %s tok/s %s | ", $1, $3, $NF}')"
echo "total ${SECONDS}s"
