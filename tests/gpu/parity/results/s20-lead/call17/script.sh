#!/bin/bash
# session 20 call 17: the gate's serving step on the 20b again, twice (call 16 failed it once: request 2 of 8 concurrent
# greedy completions left its lone text after 248 equal characters; calls 4 and 9 passed it with the same decode paths).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
for r in 1 2; do
  timeout 250 tests/gpu/gate.sh --build $B --out /tmp/g$r --full --steps serving > $O/gate$r.txt 2>&1; echo "gate $r rc=$? ${SECONDS}s"
  grep -E "^GATE" $O/gate$r.txt; grep -hE "^(ok|FAIL).*(concurrent|batched)" /tmp/g$r/gate/serving20b.txt
done
echo "total ${SECONDS}s"
