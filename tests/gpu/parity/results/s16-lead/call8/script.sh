#!/bin/bash
# session 16 call 8: main 21d9725 (engine unchanged since e6d9d7a; gptoss_kernels line-buffered, with
# --moe-decode-timing): the new mode, then every kernel check.
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe-decode-timing.txt 2>&1; echo "moe-decode-timing rc=$? ${SECONDS}s"
tail -1 $O/moe-decode-timing.txt; grep -E "timing (gate_up_decode|down_decode)" $O/moe-decode-timing.txt | head -3
timeout 200 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"; tail -1 $O/kernels.txt; grep -E "^FAIL" $O/kernels.txt | head
echo "total ${SECONDS}s"
