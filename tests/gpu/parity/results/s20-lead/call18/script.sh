#!/bin/bash
# session 20 call 18: which change moves request 2 of the 20b serving check (calls 16-17: 3 of 3 fail at the same
# token): the serving step with the prompt experts' F16 form off (LLMR_GPTOSS_PROMPT_MOE_F16=0, step 34), then with the
# pre-staged rows off (LLMR_GPTOSS_BATCH_MOE_PRESTAGE=0, step 31; bit for bit by the kernel checks).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
for v in LLMR_GPTOSS_PROMPT_MOE_F16=0 LLMR_GPTOSS_BATCH_MOE_PRESTAGE=0; do
  env $v timeout 200 tests/gpu/gate.sh --build $B --out /tmp/g-$v --full --steps serving > $O/gate-$v.txt 2>&1; echo "$v: gate rc=$? ${SECONDS}s"
  grep -E "^GATE serving-20b" $O/gate-$v.txt
done
echo "total ${SECONDS}s"
