#!/bin/bash
# Session 36 call 2 (H200): main + nosync-counts + mixed-tiles (call 1's two winners). 1) the full gate on the
# defaults (expert cache on) and, beside it, the gate's self-test, parity and batching without the cache, then the
# parity of 20b-2l's 2,000-token prompt in one chunk without the cache (the prompt kernel's 128-row tiles and their
# 64-row tails); 2) bench/prefill and bench/throughput (64 streams) with and without the cache, alone on the GPU.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1 &
G1=$!
{ LLMR_GPTOSS_EXPERT_CACHE=0 tests/gpu/gate.sh --build $B --out /tmp/g2 --full --steps "selftest parity batching"
  echo "gate-nocache rc=$? ${SECONDS}s"
  LLMR_GPTOSS_EXPERT_CACHE=0 PARITY_WORK=/tmp/pw tests/gpu/parity/run.sh --build $B --out /tmp/p2 --presets 20b-2l \
    --seeds 1 --lengths 2000 --no-unit --piece 2048 > /tmp/p2.txt 2>&1
  echo "parity piece 2048 (no cache) rc=$? ${SECONDS}s"; tail -4 /tmp/p2.txt | cut -c1-200; } > $O/gate-nocache.txt 2>&1 &
G2=$!
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1
wait $G1; echo "gate rc=$? ${SECONDS}s"; grep -E "^GATE" $O/gate.txt; grep -E "FAIL" /tmp/g/gate/kernels.txt | head -5
wait $G2; grep -E "^GATE|rc=|PASS|FAIL" $O/gate-nocache.txt | head -12
for c in 0 2; do
  LLMR_GPTOSS_EXPERT_CACHE=$c timeout 60 $B/bench/prefill --model /tmp/m20b --lengths 256,512,768,1024,2048,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "prefill cache=$c rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s ms %s GB | ", $1, $2, $6}')"
  { echo "== cache $c"; cat /tmp/pf.txt; } >> $O/prefill.txt
done
for c in 0 2; do
  LLMR_GPTOSS_EXPERT_CACHE=$c timeout 60 $B/bench/throughput --model /tmp/m20b --streams 64 > /tmp/tp.txt 2>&1
  echo "throughput cache=$c rc=$?: $(grep -E '^ +64 ' /tmp/tp.txt | head -1)"
  { echo "== cache $c"; cat /tmp/tp.txt; } >> $O/throughput.txt
done
echo "total ${SECONDS}s"
