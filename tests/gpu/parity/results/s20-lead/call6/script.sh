#!/bin/bash
# session 20 call 6: the batched step's router over several blocks per token (LLMR_GPTOSS_ROUTER_BLOCKS, default 1:
# one SM reads the 184 KB of router rows per token, ~10 us a layer), bench/throughput at 8 and 64 streams for 1 / 4 / 8
# / 16 blocks, twice in alternating order (main at 9ea859b).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
{ for rb in 1 8 4 16 16 4 8 1; do
    echo "=== ROUTER_BLOCKS=$rb"; LLMR_GPTOSS_ROUTER_BLOCKS=$rb timeout 120 $B/bench/throughput --model /tmp/m20b --streams 8,64 2>&1 | grep -E "^ +(8|64) +[0-9]+ |^ +(2-3|4-7|8-15|16-31|32-63|64) |WARN|rror"
done; } > $O/tp-ab.txt 2>&1; cat $O/tp-ab.txt; echo "total ${SECONDS}s"
