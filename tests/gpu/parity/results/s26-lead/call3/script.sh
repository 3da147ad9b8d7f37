#!/bin/bash
# session 26 call 3: step 53's one launch, where its time goes (per-CTA phase times) with the weights' copies asked
# all at the start, one at the start, or all after the wait.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 120 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"
grep -E "^FAIL|attention \+ o_proj|checks|phases|^       " $O/kernels.txt | cut -c1-250
