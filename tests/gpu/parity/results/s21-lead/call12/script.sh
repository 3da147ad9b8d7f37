#!/bin/bash
# session 21 call 12: the final build's standing figures: bench/decode (batch 1, contexts 128 / 1,024 / 4,096) and
# bench/throughput at 1 / 8 / 32 / 64 streams.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 150 $B/bench/decode --model /tmp/m20b > $O/decode.txt 2>&1; echo "decode rc=$? ${SECONDS}s"; tail -8 $O/decode.txt
timeout 150 $B/bench/throughput --model /tmp/m20b --streams 1,8,32,64 > $O/tp.txt 2>&1; echo "tp rc=$? ${SECONDS}s"
grep -E "^ +(1|8|32|64) +[0-9]+ +[0-9]+ " $O/tp.txt
echo "total ${SECONDS}s"
