#!/bin/bash
# session 31 call 6: the review's refactor of the tensor-core ring's chunk body (mi_chunk, mi_rows_out: one body for the
# checkpoint's and the tiled stage; the same instructions, registers renamed): the T = 1 MoE checks (the tiled ones
# among them) and the tensor-core expert checks.
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
B=/tmp/B/build; SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe-decode.txt 2>&1; echo "moe-decode-timing rc=$? ${SECONDS}s"
grep -hE "^FAIL|checks, |tiled" $O/moe-decode.txt | cut -c1-200
timeout 60 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/moe-mma.txt 2>&1; echo "moe-mma-checks rc=$? ${SECONDS}s"
grep -hE "^FAIL|checks, " $O/moe-mma.txt | cut -c1-200
