#!/bin/bash
# session 19 call 10: the gate for gptoss_qkv_rows on by default (the same build as call 9, whose kernel checks passed
# 781/781): selftest, parity, batching and serving, --full (the 20b too).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 540 tests/gpu/gate.sh --build $B --out /tmp/g --steps "selftest parity batching serving" --full 2>&1 | tail -8
cp -r /tmp/g/gate $O/ 2>/dev/null
echo "total ${SECONDS}s"
