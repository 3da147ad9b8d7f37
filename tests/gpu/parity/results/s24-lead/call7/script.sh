#!/bin/bash
# session 24 call 7: the final build (steps 46 + 47 on by default, LLMR_GPTOSS_BATCH_FUSE=4): the gate's kernels,
# self-test, parity and serving steps (tiny and 20b); then the flaky 20b batching case (greedy request 2, parting at its
# last step in ~30% of runs with session 23's engine too, call 6): 6 runs with the batched step's dense GEMMs on 3 bf16
# parts (LLMR_GPTOSS_BATCH_TC_SPLIT=3, fp32 level) against 3 at the default 2 parts, alternating.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 330 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels selftest parity serving" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^request [0-9]|FAIL" /tmp/g/gate/serving20b.txt 2>/dev/null | cut -c1-200 | head -10
tar -C /tmp/g -czf $O/gate-logs.tgz gate
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for i in 1 2 3; do for sp in 3 3 2; do
  LLMR_GPTOSS_BATCH_TC_SPLIT=$sp timeout 100 $B/tests/gpu/gptoss_batching --model /tmp/m20b > /tmp/b.txt 2>&1; rc=$?
  { echo "=== run $i split $sp rc=$rc"; cat /tmp/b.txt; } >> $O/batching.txt
  echo "run $i split $sp rc=$rc ${SECONDS}s $(tail -1 /tmp/b.txt) | $(grep -E '^FAIL' /tmp/b.txt | cut -c1-100)"
done; done
echo "total ${SECONDS}s"
