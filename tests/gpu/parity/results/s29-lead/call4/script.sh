#!/bin/bash
# session 29 call 4: the full gate on the session's engine (the step ahead for lone and batched rows, the radix
# sampler, the mended tie check; also session 28's refactors never run on a GPU before: e1c0622, 7001ce4, 0a12260).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 480 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head
grep -hE "timing sampling|step ahead" /tmp/g/gate/*.txt | cut -c1-200
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
echo "total ${SECONDS}s"
