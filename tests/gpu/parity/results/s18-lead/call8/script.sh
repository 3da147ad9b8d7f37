#!/bin/bash
# session 18 call 8: gptoss_kernels --stream-timing: one launch reading 8 .. 512 MB from HBM, plain loads and the ring,
# to see what a kernel of a decode step's size loses to its ramp and tail alone (steps 21-22 both came out slower).
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 120 $B/tests/gpu/gptoss_kernels --stream-timing 2>&1 | tee $O/stream.txt
timeout 60 $B/tests/gpu/gptoss_kernels --stream-timing > $O/stream2.txt 2>&1; echo "again rc=$?"; cat $O/stream2.txt | grep -E " (8|24|512) MB"
echo "total ${SECONDS}s"
