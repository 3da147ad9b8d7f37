#!/bin/bash
# session 20 call 3: the pre-staged F16 rows read straight from global memory (LLMR_GPTOSS_MOE_STREAM_PRE=2, no
# staging, no barrier) beside the shared-memory copy (1) and no pre-staging: kernel checks (same bits), the experts'
# timings at T = 4..128, bench/throughput at 8 and 64 streams.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 90 $B/tests/gpu/gptoss_kernels --moe-timing 4 8 16 32 64 128 > $O/moe-timing.txt 2>&1; echo "moe-timing rc=$? ${SECONDS}s"
grep -oE "time experts T=[0-9 ]+|F16 [0-9./ ]+ ms|F16 pre-staged[^;]*" $O/moe-timing.txt
{ for v in "PRE=2" "PRE=1" "PRESTAGE=0" "PRE=2" "PRE=1" "PRESTAGE=0"; do
    echo "=== $v"
    if [ $v = PRESTAGE=0 ]; then E="LLMR_GPTOSS_BATCH_MOE_PRESTAGE=0"; else E="LLMR_GPTOSS_MOE_STREAM_$v"; fi
    env $E timeout 120 $B/bench/throughput --model /tmp/m20b --streams 8,64 2>&1 | grep -E "^ +(8|64) +[0-9]+ |^ +(2-3|4-7|8-15|16-31|32-63|64) |WARN|rror"
done; } > $O/tp-ab.txt 2>&1; cat $O/tp-ab.txt; echo "tp ${SECONDS}s"
timeout 240 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma.txt 2>&1; echo "mma rc=$? ${SECONDS}s"; grep -E "FAIL|pre-staged|checks" $O/mma.txt | head -20
echo "total ${SECONDS}s"
