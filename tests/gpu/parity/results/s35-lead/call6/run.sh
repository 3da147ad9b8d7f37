#!/bin/bash
# Session 35 call 6 (H200): without the expert cache (LLMR_GPTOSS_EXPERT_CACHE=0) the prompt kernel now takes every
# chunk above 208 tokens and the experts are tiled in their place (model.cu prompt_kernel_covers). 1) the gate's
# self-test, parity and batching (tiny and 20b) that way; 2) bench/prefill with and without the cache (VRAM);
# 3) bench/throughput at 64 streams with and without the cache.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 & MK=$!
LLMR_GPTOSS_EXPERT_CACHE=0 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1
echo "gate (no cache) rc=$? ${SECONDS}s"; grep -E "^GATE" $O/gate-nocache.txt
grep -hE "tiled in place|expert cache" /tmp/g/gate/batching20b.txt | head -3
tail -3 /tmp/g/gate/parity.txt | cut -c1-200
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
for c in 0 2; do
  LLMR_GPTOSS_EXPERT_CACHE=$c timeout 90 $B/bench/prefill --model /tmp/m20b --lengths 128,256,512,1024,2048,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "prefill cache=$c rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s ms %s GB | ", $1, $2, $6}')"
  grep -E "tiled|expert cache|loaded" /tmp/pf.txt | cut -c1-200
  { echo "== cache $c"; cat /tmp/pf.txt; } >> $O/prefill.txt
done
for c in 0 2; do
  LLMR_GPTOSS_EXPERT_CACHE=$c timeout 120 $B/bench/throughput --model /tmp/m20b --streams 64 > /tmp/tp.txt 2>&1
  echo "throughput cache=$c rc=$?"; grep -E "^ +64 |VRAM" /tmp/tp.txt | head -3
  { echo "== cache $c"; cat /tmp/tp.txt; } >> $O/throughput.txt
done
echo "total ${SECONDS}s"
