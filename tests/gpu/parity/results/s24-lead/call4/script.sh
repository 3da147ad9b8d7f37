#!/bin/bash
# session 24 call 4: is call 2-3's batching-20b failure (greedy request 2, the first run after mkmodel, with fuse 4 and 5)
# the default's, or the check's? This build (call 3's) with fuse 3 (no step 47) as the first run after a fresh model,
# then 4, 3, 4; a second fresh model with fuse 4 first. Then 32 and 64 streams at fuse 3 / 4.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
run() { # model fuse tag
  LLMR_GPTOSS_BATCH_FUSE=$2 timeout 150 $B/tests/gpu/gptoss_batching --model $1 > /tmp/b.txt 2>&1; rc=$?
  { echo "=== $3 (fuse $2) rc=$rc"; cat /tmp/b.txt; } >> $O/batching.txt
  echo "$3 rc=$rc ${SECONDS}s $(tail -1 /tmp/b.txt) | $(grep -E '^FAIL' /tmp/b.txt | cut -c1-160)"
}
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
run /tmp/m20b 3 a-f3-first; run /tmp/m20b 4 a-f4; run /tmp/m20b 3 a-f3; run /tmp/m20b 4 a-f4b
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20c > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
run /tmp/m20c 4 c-f4-first; run /tmp/m20c 3 c-f3
for f in 3 4 4 3; do
  LLMR_GPTOSS_BATCH_FUSE=$f timeout 80 $B/bench/throughput --model /tmp/m20b --streams 32,64 > /tmp/t.txt 2>&1; rc=$?
  { echo "=== fuse $f rc=$rc"; cat /tmp/t.txt; } >> $O/tp.txt
  echo "fuse=$f rc=$rc ${SECONDS}s"; grep -E '^ +(32|64) +[0-9]+ +[0-9]+ |^ +(16-31|64) +[0-9]+ ' /tmp/t.txt
done
echo "total ${SECONDS}s"
