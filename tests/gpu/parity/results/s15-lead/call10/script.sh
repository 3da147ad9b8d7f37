#!/bin/bash
# session 15 call 10: the kernel checks with the MoE per-kernel timings run in two passes (forward, reversed) and a
# control slot (gate_up table decode twice), to see the slot bias step 15 found.
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$?"; tail -1 $O/kernels.txt; grep -E "^FAIL" $O/kernels.txt | head
grep -E "timing (router_decode|gate_up_decode|down_decode)" $O/kernels.txt
echo "total ${SECONDS}s"
