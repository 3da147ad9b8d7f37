#!/bin/bash
# session 23 call 3: step 44 after call 2 (per-stage weight offset fixed; activation copies 3 stages ahead) (gptoss_mxfp4_mma_shared, LLMR_GPTOSS_BATCH_MOE_SHARED=1): the tensor-core expert checks
# and timings (--moe-mma-checks), gptoss_batching on tiny and the 20b with it on, 64 streams off / on A B A B.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 240 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma.txt 2>&1; echo "mma rc=$? ${SECONDS}s"
grep -E "^FAIL|mma_shared|checks, " $O/mma.txt | cut -c1-200 | head -30
grep -E "^time experts" $O/mma.txt | grep -oE "time experts T=[0-9]+|F16 pre-staged [0-9.]+ / [0-9.]+ ms, shared [0-9.]+ / [0-9.]+ ms \([0-9.]+ TB/s\)" | paste - -
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for f in 0 1 0 1; do
  LLMR_GPTOSS_BATCH_MOE_SHARED=$f timeout 100 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/tp-$f.txt 2>&1
  echo "== shared $f rc=$? ${SECONDS}s"; grep -E "^ +64 +[0-9]+ |^ +(32-63|64) " $O/tp-$f.txt
done
export LLMR_GPTOSS_BATCH_MOE_SHARED=1
timeout 200 $B/tests/gpu/gptoss_batching --mkmodel $B/bin/llmr-mkmodel > $O/batching-tiny.txt 2>&1; echo "batching tiny rc=$? ${SECONDS}s: $(tail -1 $O/batching-tiny.txt)"
timeout 200 $B/tests/gpu/gptoss_batching --model /tmp/m20b > $O/batching-20b.txt 2>&1; echo "batching 20b rc=$? ${SECONDS}s: $(tail -1 $O/batching-20b.txt)"
grep -E "FAIL|shared" $O/batching-20b.txt | head -5
echo "total ${SECONDS}s"
