#!/bin/bash
# session 28 call 3: what the T = 1 gate_up's activation split costs (the tensor-core ring with the split skipped,
# ring diag 3: wrong results, timing only) and what the router finish costs in o_proj (gemv1_router alone against
# gemv1_router_finish), from --moe-decode-timing three times; ncu of the two kernels in the engine's decode.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
for r in 1 2 3; do
  timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe-$r.txt 2>&1; echo "moe run $r rc=$? ${SECONDS}s"
  grep -E "^FAIL|tensor-core ring|timing o_proj|timing down_decode, table" $O/moe-$r.txt | cut -c1-240
done
echo "total ${SECONDS}s"
