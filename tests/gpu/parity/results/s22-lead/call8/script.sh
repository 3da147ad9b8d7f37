#!/bin/bash
# session 22 call 8: step 43, o_proj's split written by the attention (gptoss_attention_rows_split; LLMR_GPTOSS_BATCH_FUSE=2,
# the default; 1 = step 41 alone): all kernel checks (attention_rows: the same output and its split), gptoss_batching
# on tiny and the 20b, 64 streams with 1 and 2, A B A B.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 300 $B/tests/gpu/gptoss_kernels > /tmp/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"
grep -E "checks, [0-9]+ failed|^FAIL|o_proj's parts" /tmp/kernels.txt | head -12 | tee $O/kernels-summary.txt
timeout 200 $B/tests/gpu/gptoss_batching --mkmodel $B/bin/llmr-mkmodel > $O/batching-tiny.txt 2>&1; echo "batching tiny rc=$? ${SECONDS}s: $(tail -1 $O/batching-tiny.txt)"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 300 $B/tests/gpu/gptoss_batching --model /tmp/m20b > $O/batching-20b.txt 2>&1; echo "batching 20b rc=$? ${SECONDS}s: $(tail -1 $O/batching-20b.txt)"
for f in 1 2 1 2; do
  LLMR_GPTOSS_BATCH_FUSE=$f timeout 100 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/tp-$f.txt 2>&1
  echo "== fuse $f rc=$? ${SECONDS}s"; grep -E "^ +64 +[0-9]+ |^ +(32-63|64) " $O/tp-$f.txt
done
echo "total ${SECONDS}s"
