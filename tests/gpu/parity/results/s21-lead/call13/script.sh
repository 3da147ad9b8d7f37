#!/bin/bash
# session 21 call 13: packed prefill falls back to lone prefills when the group's KV pages are short (review mend):
# the batching binary (its packed case and the paged pool), and 64 streams once.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 200 $B/tests/gpu/gptoss_batching > $O/batching.txt 2>&1; echo "batching rc=$? ${SECONDS}s"
grep -E "checks, [0-9]+ failed|FAIL|packed prefill:" $O/batching.txt | head -6
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1
timeout 60 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/tp.txt 2>&1; echo "tp rc=$? ${SECONDS}s"
grep -E "^ +64 +[0-9]+ +[0-9]+ " $O/tp.txt
echo "total ${SECONDS}s"
