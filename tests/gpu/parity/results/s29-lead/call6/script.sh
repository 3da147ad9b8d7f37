#!/bin/bash
# session 29 call 6: the batched step ahead of the host again (073497a) with the batched step's pinned host stage
# doubled (two, used in turn: the cause of call 4's serving failure as read after it, the next step's host work
# rewriting the stage before a time-sliced GPU had run the previous step's copy). The batch checks (sample_rows at an
# odd vocabulary of 10,001 among them), the gate's selftest, batching and serving steps on both checkpoints, then
# bench/throughput 64 streams with the step ahead off / on.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 120 $B/tests/gpu/gptoss_kernels --batch-checks > $O/batch-checks.txt 2>&1; echo "batch-checks rc=$? ${SECONDS}s"
grep -E "^FAIL|sample_rows|checks" $O/batch-checks.txt | cut -c1-200 | tail -6
timeout 300 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "selftest batching serving" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL|request [0-9]" /tmp/g/gate/serving*.txt 2>/dev/null | cut -c1-250 | head -20
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for a in 0 1; do
  LLMR_GPTOSS_STEP_AHEAD=$a timeout 60 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/tp-a$a.txt 2>&1; echo "throughput ahead=$a rc=$? ${SECONDS}s"
  grep -E "^ +[0-9]+ |streams, wall" $O/tp-a$a.txt | cut -c1-300
done
echo "total ${SECONDS}s"
