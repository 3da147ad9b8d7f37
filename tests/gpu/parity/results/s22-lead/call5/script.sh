#!/bin/bash
# session 22 call 5: step 41 after the mends of call 4 (the unfused path skipped lm_head: a K_ overwrote the status
# that chose it; the finish kernel's check reports its error instead of demanding the same bits): the row kernels'
# checks, gptoss_batching on tiny with the fusion off and on and on the 20b, 32 / 64 streams off / on A B A B.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 100 $B/tests/gpu/gptoss_kernels --batch-checks > $O/batch-checks.txt 2>&1; echo "batch checks rc=$? ${SECONDS}s"
grep -E "rows_|checks," $O/batch-checks.txt
for f in 0 1; do
  LLMR_GPTOSS_BATCH_FUSE=$f timeout 200 $B/tests/gpu/gptoss_batching --mkmodel $B/bin/llmr-mkmodel > $O/batching-tiny-$f.txt 2>&1
  echo "batching tiny fuse=$f rc=$? ${SECONDS}s: $(tail -1 $O/batching-tiny-$f.txt)"
done
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 300 $B/tests/gpu/gptoss_batching --model /tmp/m20b > $O/batching-20b.txt 2>&1; echo "batching 20b rc=$? ${SECONDS}s: $(tail -1 $O/batching-20b.txt)"
for f in 0 1 0 1; do
  LLMR_GPTOSS_BATCH_FUSE=$f timeout 100 $B/bench/throughput --model /tmp/m20b --streams 32,64 > $O/tp-$f.txt 2>&1
  echo "== fuse $f rc=$? ${SECONDS}s"; grep -E "^ +(32|64) +[0-9]+ |^ +(32-63|64) " $O/tp-$f.txt
done
echo "total ${SECONDS}s"
