#!/bin/bash
# session 25 call 2: the step schedules (gptoss_cuda_debug_step: batched steps of chosen rows against each row alone,
# no threads) on the 20b, three times, then the tiny model's whole gptoss_batching once.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for i in 1 2 3; do
  timeout 200 $B/tests/gpu/gptoss_batching --model /tmp/m20b > /tmp/b.txt 2>&1; rc=$?
  { echo "=== 20b run $i rc=$rc"; cat /tmp/b.txt; } >> $O/batching.txt
  echo "20b run $i rc=$rc ${SECONDS}s $(tail -1 /tmp/b.txt)"; grep -E "step schedule|^FAIL" /tmp/b.txt | cut -c1-300
  [ $SECONDS -gt 250 ] && break
done
timeout 250 $B/tests/gpu/gptoss_batching > /tmp/b.txt 2>&1; rc=$?
{ echo "=== tiny rc=$rc"; cat /tmp/b.txt; } >> $O/batching.txt
echo "tiny rc=$rc ${SECONDS}s $(tail -1 /tmp/b.txt)"; grep -E "step schedule|^FAIL" /tmp/b.txt | cut -c1-300
echo "total ${SECONDS}s"
