#!/bin/bash
# session 20 call 8: the small batched steps' experts in occupancy mode 3 (8-warp CTAs, 3 an SM; the bf16 form's
# timings at T = 4 / 8 favoured it in calls 2-3) against the automatic mode 2 with the F16 form: bench/throughput at 8
# streams (steps of 1-8 rows), three times each, alternating; the experts' timings at T = 4 / 8 / 16.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
{ for v in 0 3 0 3 0 3; do
    echo "=== OCC=$v"; LLMR_GPTOSS_MOE_STREAM_OCC=$v timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8 2>&1 | grep -E "^ +8 +[0-9]+ |^ +(2-3|4-7|8-15) |WARN|rror"
done; } > $O/tp-ab.txt 2>&1; cat $O/tp-ab.txt; echo "tp ${SECONDS}s"
for v in 0 3; do LLMR_GPTOSS_MOE_STREAM_OCC=$v timeout 60 $B/tests/gpu/gptoss_kernels --moe-timing 4 8 16 > $O/moe-timing-occ$v.txt 2>&1
  echo "occ $v: $(grep -oE "time experts T=[0-9]+|F16 [0-9./ ]+ ms" $O/moe-timing-occ$v.txt | paste -sd' ')"; done
echo "total ${SECONDS}s"
