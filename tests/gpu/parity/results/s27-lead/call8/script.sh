#!/bin/bash
# session 27 call 8: where the router finish in o_proj's last block spends its time (alt/ts: gptoss_gemv1_router_finish
# with %globaltimer stamps, finish-timing-diagnostic.diff): the last block's arrival, its fence and count, the partial
# rows' sums, the top-4 and writes, six launches (the --moe-decode-timing run's router split test).
O=$OUT; mkdir -p /tmp/B
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf -
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 60 /tmp/B/alt/ts/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe-decode-ts.txt 2>&1; echo "ts rc=$? ${SECONDS}s"
grep -E "^(FAIL|[0-9]+ checks)|diag finish|timing o_proj" $O/moe-decode-ts.txt | cut -c1-220
echo "total ${SECONDS}s"
