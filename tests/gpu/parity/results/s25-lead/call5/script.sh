#!/bin/bash
# session 25 call 5: the step schedules with the batched step's router logits against alone (their noise), one of
# them call 4's failing composition; then the threaded check built with NT_ROUTER 2e-3 (gptoss_batching_nt2),
# up to 10 runs: do its failures become router flips it explains?
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for i in 1 2 3 4 5 6 7 8 9 10; do
  LLMR_GPTOSS_SCHED_TRACE=1 timeout 200 $B/tests/gpu/gptoss_batching_nt2 --model /tmp/m20b > /tmp/b.txt 2>&1; rc=$?
  { echo "=== 20b run $i rc=$rc"; cat /tmp/b.txt; } >> $O/batching.txt
  echo "20b run $i rc=$rc ${SECONDS}s $(tail -1 /tmp/b.txt)"; grep -E "step schedule|^FAIL|explained" /tmp/b.txt | cut -c1-700
  [ $SECONDS -gt 260 ] && break
done
echo "total ${SECONDS}s"
