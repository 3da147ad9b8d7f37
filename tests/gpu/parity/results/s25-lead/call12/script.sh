#!/bin/bash
# session 25 call 12: the batched step's dense GEMMs (lm_head, q/k/v, o_proj) by cuBLAS's default and by each of
# cublasLt's heuristic algorithms, weights from HBM (gptoss_kernels --lm-head-timing): is there a faster algorithm?
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 200 $B/tests/gpu/gptoss_kernels --lm-head-timing > $O/gemm.txt 2>&1; echo "rc=$? ${SECONDS}s"; cat $O/gemm.txt
