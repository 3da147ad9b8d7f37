#!/bin/bash
# session 21 call 1: the full engine gate with logprobs through the API (ABI 1.1; the kernel check of
# gptoss_logprobs_rows; the serving check judging a lone-vs-batched parting by its logprobs, e2e/gpu/near_tie.py)
# and step 34 (short prompts' experts on the F16 form) on by default. If the 20b serving step fails, it runs again
# with step 34 off, to tell the two changes apart.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 470 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; mkdir -p $O/gate; cp /tmp/g/gate/*.txt $O/gate/ 2>/dev/null
grep -hE "logprobs_rows|checks, [0-9]+ failed" /tmp/g/gate/kernels.txt | head -5
grep -hE "^request [0-9]|8 concurrent|FAIL" /tmp/g/gate/serving*.txt | head -20
if ! grep -q "^GATE serving-20b: PASS" $O/gate.txt && [ $SECONDS -lt 430 ]; then
  LLMR_GPTOSS_PROMPT_MOE_F16=0 timeout $((580 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g0 --full --steps serving > $O/gate-f16off.txt 2>&1
  echo "step 34 off: serving rc=$? ${SECONDS}s"; grep -E "^GATE" $O/gate-f16off.txt
  grep -hE "^request [0-9]|8 concurrent|FAIL" /tmp/g0/gate/serving20b.txt | head -12
fi
echo "total ${SECONDS}s"
