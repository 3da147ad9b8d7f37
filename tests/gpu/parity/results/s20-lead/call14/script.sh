#!/bin/bash
# session 20 call 14: the final build's standing (main at 3eb9bb2; engine code as 5b966ec): bench/decode at 128 / 1,024
# / 4,096 and bench/throughput at 1 / 8 / 32 / 64 streams, with the per-part profile of one 8 / 64-stream run.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 200 $B/bench/decode --model /tmp/m20b > $O/decode.txt 2>&1; echo "decode rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ " $O/decode.txt
timeout 200 $B/bench/throughput --model /tmp/m20b --streams 1,8,32,64 > $O/tp.txt 2>&1; echo "tp rc=$? ${SECONDS}s"; grep -E "^ +(1|8|32|64) +[0-9]+ " $O/tp.txt
LLMR_GPTOSS_BATCH_PROFILE=1 timeout 120 $B/bench/throughput --model /tmp/m20b --streams 8,64 > $O/tp-profile.txt 2>&1; echo "tp-profile rc=$? ${SECONDS}s"
grep -E "^ +(8|64) +[0-9]+ |rows|^ +(1|2-3|4-7|8-15|16-31|32-63|64) " $O/tp-profile.txt | head -30
echo "total ${SECONDS}s"
