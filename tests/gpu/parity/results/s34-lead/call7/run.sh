#!/bin/bash
# Session 34 call 7 (H200): the gate's parity step without the expert cache and with gptoss_mxfp4_prompt_gemm up to
# 2,048 tokens (call 6: without the cache it takes a 1,024-token prefill from 53.2 to 39.3 ms), so its 128-row tiles run
# in the engine against transformers (the 2,000-token prompts) before that becomes the uncached default.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
LLMR_GPTOSS_EXPERT_CACHE=0 LLMR_GPTOSS_PROMPT_MMA=2048 timeout 230 tests/gpu/gate.sh --build $B --out /tmp/g --steps parity > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; cat $O/gate.txt; grep -E "PASS|FAIL" /tmp/g/gate/parity.txt | tail -12 | cut -c1-200
cp /tmp/g/gate/parity.txt $O/ 2>/dev/null; echo "total ${SECONDS}s"
