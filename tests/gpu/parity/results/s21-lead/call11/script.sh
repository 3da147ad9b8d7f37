#!/bin/bash
# session 21 call 11: the batching check's new packed-prefill case (tiny model, crossover at 64 tokens: the prompts
# of 100..300 tokens grouped in the batched runs; same tokens as alone; fewer prefill slices than prompts).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 300 $B/tests/gpu/gptoss_batching > $O/batching.txt 2>&1; echo "batching rc=$? ${SECONDS}s"
grep -E "checks, [0-9]+ failed|FAIL|packed" $O/batching.txt | head -10
echo "total ${SECONDS}s"
