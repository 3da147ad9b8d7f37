#!/bin/bash
# session 22 call 4: step 41, the row kernels around the batched step's tensor-core q/k/v (LLMR_GPTOSS_BATCH_FUSE,
# on by default): kernel checks (bit for bit against the launches they replace), gptoss_batching on tiny with it off
# and on (the same printed figures if the same bits), on the 20b with it on, and 32 / 64 streams off / on, A B A B.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 300 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"
grep -E "checks, [0-9]+ failed|^FAIL" $O/kernels.txt | head -8; grep -E "rows_norm_split|rows_qkv_finish" $O/kernels.txt
for f in 0 1; do
  LLMR_GPTOSS_BATCH_FUSE=$f timeout 300 $B/tests/gpu/gptoss_batching --mkmodel $B/bin/llmr-mkmodel > $O/batching-tiny-$f.txt 2>&1
  echo "batching tiny fuse=$f rc=$? ${SECONDS}s: $(tail -1 $O/batching-tiny-$f.txt)"
done
diff <(grep -v "ms\b\|seconds\|tmp" $O/batching-tiny-0.txt) <(grep -v "ms\b\|seconds\|tmp" $O/batching-tiny-1.txt) > $O/batching-tiny.diff; echo "tiny diff lines: $(wc -l < $O/batching-tiny.diff)"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 400 $B/tests/gpu/gptoss_batching --model /tmp/m20b > $O/batching-20b.txt 2>&1; echo "batching 20b rc=$? ${SECONDS}s: $(tail -1 $O/batching-20b.txt)"
for f in 0 1 0 1; do
  LLMR_GPTOSS_BATCH_FUSE=$f timeout 100 $B/bench/throughput --model /tmp/m20b --streams 32,64 > $O/tp-$f.txt 2>&1
  echo "== fuse $f rc=$? ${SECONDS}s"; grep -E "^ +(32|64) +[0-9]+ |^ +(32-63|64) " $O/tp-$f.txt
done
echo "total ${SECONDS}s"
