#!/bin/bash
# session 24 call 5: the 20b batching check's greedy request 2 parted in 3 of 9 runs with fuse 4-5 and 0 of 5 with fuse 3
# (calls 2-4). Step 47 cannot change a value at the check's shapes (its decode steps have <= 8 rows; the prompts' pre-
# staged rows are the same bits), so either the check is flaky on main too or the timing it changes matters: 10 runs
# each, alternating 3 and 4, on one model.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for i in 1 2 3 4 5 6 7 8 9 10; do for f in 3 4; do
  LLMR_GPTOSS_BATCH_FUSE=$f timeout 100 $B/tests/gpu/gptoss_batching --model /tmp/m20b > /tmp/b.txt 2>&1; rc=$?
  { echo "=== run $i fuse $f rc=$rc"; cat /tmp/b.txt; } >> $O/batching.txt
  echo "run $i fuse $f rc=$rc ${SECONDS}s $(tail -1 /tmp/b.txt) | $(grep -E '^FAIL' /tmp/b.txt | cut -c1-100)"
done; done
echo "total ${SECONDS}s"
