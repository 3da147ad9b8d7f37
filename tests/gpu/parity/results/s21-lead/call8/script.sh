#!/bin/bash
# session 21 call 8: gptoss_logprobs_rows in one pass with 4 candidates a thread (call 7: 0.254 / 1.456 ms at 64 rows
# for the token alone / 20 alternatives): its kernel check and timing, then the gate's kernels and serving steps (tiny
# and 20b: their batching comparison asks for logprobs through the API).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels serving" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; mkdir -p $O/gate; cp /tmp/g/gate/*.txt $O/gate/ 2>/dev/null
grep -hE "logprobs_rows" /tmp/g/gate/kernels.txt
grep -hE "^request [0-9]|8 concurrent|FAIL" /tmp/g/gate/serving*.txt | cut -c1-200 | head -20
echo "total ${SECONDS}s"
