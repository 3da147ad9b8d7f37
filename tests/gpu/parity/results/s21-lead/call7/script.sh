#!/bin/bash
# session 21 call 7: the final build (steps 34 and 38 in, step 39 out, the router's role-chunk fix): the gate's kernels
# and parity steps (with the cost of gptoss_logprobs_rows at 64 rows), then the 20b serving check once more.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels parity serving" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; mkdir -p $O/gate; cp /tmp/g/gate/*.txt $O/gate/ 2>/dev/null
grep -hE "logprobs_rows" /tmp/g/gate/kernels.txt
grep -hE "^request [0-9]|8 concurrent|FAIL" /tmp/g/gate/serving20b.txt | cut -c1-300 | head -12
echo "total ${SECONDS}s"
