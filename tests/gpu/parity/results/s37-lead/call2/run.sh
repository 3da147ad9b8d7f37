#!/bin/bash
# Session 37 call 2 (H200): the dense linears' stacked weights kept from load (LLMR_GPTOSS_DENSE_KEEP, default 2 auto)
# against stacking them every long chunk (=0, the engine as before), bench/prefill A B A B with and without the expert
# cache, and the stacked dense linears from 512 / 768 tokens (LLMR_GPTOSS_DENSE_STACKED_MIN_T; default 1,024) with the
# weights kept. Predicted: ~0.9 ms (ncu: 1.1 ms at its clocks) off every prompt of 1,024 tokens or more, whatever its
# length (1,024 tokens ~3%, 4,096 ~1%), nothing below. Then the full gate on this build (which also covers session
# 36's review commit eef501b, never run on a GPU) and, beside it, the self-test, parity and batching without the cache.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for r in 1 2; do for v in keep0 keep2 min512 min768; do for c in 0 2; do
  K=2; MT=1024; case $v in keep0) K=0 ;; min512) MT=512 ;; min768) MT=768 ;; esac
  LLMR_GPTOSS_DENSE_KEEP=$K LLMR_GPTOSS_DENSE_STACKED_MIN_T=$MT LLMR_GPTOSS_EXPERT_CACHE=$c timeout 60 $B/bench/prefill \
    --model /tmp/m20b --lengths 256,512,768,1024,2048,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "$v cache=$c $r rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s %s | ", $1, $2, $NF}') ${SECONDS}s"
  { echo "== $v cache $c $r"; cat /tmp/pf.txt; } >> $O/prefill.txt
done; done; done
grep -h "stacked dense" $O/prefill.txt | sort | uniq -c | head -4
LLMR_GPTOSS_EXPERT_CACHE=0 timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
G0=$!
timeout 515 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $G0; echo "gate without the cache rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-nocache.txt
grep -h -i "checks,\|passed\|failed" /tmp/g/gate/kernels.txt | tail -2
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt | head -8 | cut -c1-200
grep -h "kept weight" /tmp/g/gate/kernels.txt | head -5 | cut -c1-160
echo "total ${SECONDS}s"
