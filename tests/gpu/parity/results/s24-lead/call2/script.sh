#!/bin/bash
# session 24 call 2: gate_up's pre-staged rows once per token (its launch gathers them by pair), written by the batched
# router (step 47, LLMR_GPTOSS_BATCH_FUSE=4), and down's pre-staged rows written by gate_up's epilogue (step 48, =5, the
# new default): the full gate; one layer's experts at T = 16 / 64 / 128 (the fused form timed beside the others); 64
# streams in the order 3 4 5 5 4 3.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "checks, [0-9]+ failed|^FAIL|router_decode_add|pre-staged rows" /tmp/g/gate/kernels.txt | cut -c1-190 | tail -12
grep -hE "^request [0-9]|FAIL" /tmp/g/gate/serving20b.txt 2>/dev/null | cut -c1-200 | head -10
tar -C /tmp/g -czf $O/gate-logs.tgz gate
timeout 60 $B/tests/gpu/gptoss_kernels --moe-timing 16 64 128 > $O/moe-timing.txt 2>&1; echo "moe-timing rc=$? ${SECONDS}s"
grep -E "^time experts" $O/moe-timing.txt | cut -c1-400
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
n=0; for f in 3 4 5 5 4 3; do n=$((n+1))
  LLMR_GPTOSS_BATCH_FUSE=$f timeout 50 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/tp$n-fuse$f.txt 2>&1
  echo "fuse=$f rc=$? ${SECONDS}s | $(grep -E '^ +64 +[0-9]+ +[0-9]+ ' $O/tp$n-fuse$f.txt) | $(grep -E '^ +64 +[0-9]+ +64.0' $O/tp$n-fuse$f.txt)"
done
echo "total ${SECONDS}s"
