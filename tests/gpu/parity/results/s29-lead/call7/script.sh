#!/bin/bash
# session 29 call 7: the engine as landed at 7ffa03d (the radix sampler's row state one field shorter): the batch
# checks (sample_rows in 4 shapes against one gptoss_sample a row) and the self-test.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 60 $B/tests/gpu/gptoss_kernels --batch-checks > $O/batch-checks.txt 2>&1; echo "batch-checks rc=$? ${SECONDS}s"
grep -E "^FAIL|sample_rows|checks, " $O/batch-checks.txt | cut -c1-200
timeout 60 tests/gpu/gate.sh --build $B --out /tmp/g --steps selftest > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"; grep -E "^GATE" $O/gate.txt
echo "total ${SECONDS}s"
