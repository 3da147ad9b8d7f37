#!/bin/bash
# session 18 call 16: the final engine's standing on whichever card comes (bench/decode at 128 / 1,024 / 4,096,
# bench/throughput at 1 / 8 / 64 streams) and that card's streaming floor by size (gptoss_kernels --stream-timing).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 60 $B/tests/gpu/gptoss_kernels --stream-timing > $O/stream.txt 2>&1; echo "stream rc=$?"; grep -E "ring depth 4" $O/stream.txt
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024,4096 > $O/decode.txt 2>&1; grep -E "^ +[0-9]+ |copy" $O/decode.txt
timeout 150 $B/bench/throughput --model /tmp/m20b --streams 1,8,64 > $O/tp.txt 2>&1; echo "tp rc=$?"; grep -E "^ +(1|8|64) +[0-9]+ +[0-9]+ " $O/tp.txt
rm -rf /tmp/m20b
echo "total ${SECONDS}s"
