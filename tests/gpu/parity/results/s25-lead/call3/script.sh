#!/bin/bash
# session 25 call 3: the step schedules from the check's own prompts (the failing run's rows exactly), and the
# oracle's router gaps at the parting position, on the 20b: up to 5 runs.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for i in 1 2 3 4 5; do
  LLMR_GPTOSS_SCHED_TRACE=1 timeout 200 $B/tests/gpu/gptoss_batching --model /tmp/m20b > /tmp/b.txt 2>&1; rc=$?
  { echo "=== 20b run $i rc=$rc"; cat /tmp/b.txt; } >> $O/batching.txt
  echo "20b run $i rc=$rc ${SECONDS}s $(tail -1 /tmp/b.txt)"; grep -E "step schedule|^FAIL" /tmp/b.txt | cut -c1-900
  [ $SECONDS -gt 150 ] && break
done
echo "total ${SECONDS}s"
