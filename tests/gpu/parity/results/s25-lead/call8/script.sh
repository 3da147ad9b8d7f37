#!/bin/bash
# session 25 call 8: where the time goes now, H100, final engine of call 7: the batch-1 profile (LLMR_GPTOSS_PROFILE=1,
# each launch timed, context 128 and 1,024), the 64-row step's parts (LLMR_GPTOSS_BATCH_PROFILE=1), the streaming
# floors (--stream-timing), and ncu of one 64-row step's kernels (launch counts and durations).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
LLMR_GPTOSS_PROFILE=1 timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024 > $O/profile.txt 2>&1; echo "profile rc=$? ${SECONDS}s"
grep -A40 "gptoss_cuda profile" $O/profile.txt | head -60
LLMR_GPTOSS_BATCH_PROFILE=1 timeout 100 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/tp-profile.txt 2>&1; echo "tp profile rc=$? ${SECONDS}s"
grep -E "per step|^ +(rows|1|2-3|4-7|8-15|16-31|32-63|64) " $O/tp-profile.txt
timeout 60 $B/tests/gpu/gptoss_kernels --stream-timing > $O/stream.txt 2>&1; echo "stream rc=$? ${SECONDS}s"; tail -15 $O/stream.txt
echo "total ${SECONDS}s"
