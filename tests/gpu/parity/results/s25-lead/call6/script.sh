#!/bin/bash
# session 25 call 6: NT_ROUTER 3e-3 and the step schedules' near-tie rule: the 20b check 8 times, the tiny check once.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for i in 1 2 3 4 5 6 7 8; do
  timeout 200 $B/tests/gpu/gptoss_batching --model /tmp/m20b > /tmp/b.txt 2>&1; rc=$?
  { echo "=== 20b run $i rc=$rc"; cat /tmp/b.txt; } >> $O/batching.txt
  echo "20b run $i rc=$rc ${SECONDS}s $(tail -1 /tmp/b.txt)"; grep -E "^FAIL|explained|parts from" /tmp/b.txt | cut -c1-330
  [ $i = 1 ] && grep "step schedule" /tmp/b.txt | cut -c1-500
  [ $SECONDS -gt 200 ] && break
done
timeout 250 $B/tests/gpu/gptoss_batching > /tmp/b.txt 2>&1; rc=$?
{ echo "=== tiny rc=$rc"; cat /tmp/b.txt; } >> $O/batching.txt
echo "tiny rc=$rc ${SECONDS}s $(tail -1 /tmp/b.txt)"; grep -E "step schedule|^FAIL" /tmp/b.txt | cut -c1-400
echo "total ${SECONDS}s"
