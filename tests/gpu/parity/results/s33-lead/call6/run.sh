#!/bin/bash
# Session 33 call 6 (H200): the review's mends (tc_reduce_combine_kernel's second-part rows set to none before the
# bf16 form's loop; gptoss_prompt_precise without its repeated length test) through the gate's kernels and self-test.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
timeout 250 tests/gpu/gate.sh --build $B --out /tmp/g --steps "kernels selftest" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL|precise rows" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-200 | head -12
