#!/bin/bash
# session 21 call 14 (review): the scheduler's slice budget as one helper (sched_slice_cap, same expression): the
# batching binary (prefill slices, packed case) and the gate's serving steps (tiny and 20b, logprobs through the node).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 200 $B/tests/gpu/gptoss_batching > $O/batching.txt 2>&1; echo "batching rc=$? ${SECONDS}s"
grep -E "checks, [0-9]+ failed|FAIL|packed prefill:" $O/batching.txt | head -6
timeout 330 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps serving > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt
grep -hE "8 concurrent|FAIL" /tmp/g/gate/serving*.txt | cut -c1-200 | head -6
echo "total ${SECONDS}s"
