#!/bin/bash
# session 18 call 5: call 4's per-kernel profile again, filtered to the decode step's kernels (call 4's skipped too few
# launches and caught the warm-up's prompt kernels): ncu at boost clocks with warm caches, route ring off and on,
# beside bench/decode in the same call, to split a token's time into kernels and the gaps between them.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
for rr in 0 1; do
  LLMR_GPTOSS_ROUTE_RING=$rr timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128 2>&1 | grep -E "^ +[0-9]+ "
  LLMR_GPTOSS_ROUTE_RING=$rr timeout 150 ncu --clock-control none --cache-control none --csv --metrics gpu__time_duration.sum \
    -k regex:"qkv_decode|attention_split|gemv1|moe_router_finish|moe_gate_up_ring|moe_down_decode|argmax|embed_kernel" \
    --launch-skip 40 --launch-count 420 $B/bench/decode --model /tmp/m20b --contexts 128 --tokens 16 > $O/ncu-rr$rr.csv 2>&1
  echo "ncu rr=$rr rc=$? ${SECONDS}s"
done
rm -rf /tmp/m20b
echo "total ${SECONDS}s"
