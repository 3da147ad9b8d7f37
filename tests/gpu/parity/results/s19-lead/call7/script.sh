#!/bin/bash
# session 19 call 7: where a batched step's time goes on the final engine (LLMR_GPTOSS_BATCH_PROFILE=1 bench/throughput
# at 8 and 64 streams: per part, per step size).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
LLMR_GPTOSS_BATCH_PROFILE=1 timeout 150 $B/bench/throughput --model /tmp/m20b --streams 8,64 > $O/tp-prof.txt 2>&1; echo "tp rc=$?"
sed -n '/streams    prompt/,$p' $O/tp-prof.txt | head -60
rm -rf /tmp/m20b
echo "total ${SECONDS}s"
