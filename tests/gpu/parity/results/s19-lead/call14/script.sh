#!/bin/bash
# session 19 call 14: the experts row by row up to 5 rows (LLMR_GPTOSS_MOE_MMA_MIN_ROWS=6
# LLMR_GPTOSS_BATCH_MOE_PER_ROW=5) against the default (per row up to 3, tensor cores from 4), bench/throughput at 8
# streams, twice with the per-part profile and twice without.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for p in 1 1 0 0; do
  for v in default 5; do
    if [ $v = 5 ]; then export LLMR_GPTOSS_MOE_MMA_MIN_ROWS=6 LLMR_GPTOSS_BATCH_MOE_PER_ROW=5; else unset LLMR_GPTOSS_MOE_MMA_MIN_ROWS LLMR_GPTOSS_BATCH_MOE_PER_ROW; fi
    echo "=== per row up to $v (profile $p)"; LLMR_GPTOSS_BATCH_PROFILE=$p timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8 2>&1 | grep -E "^ +8 +[0-9]+ |^ +(2-3|4-7|8-15) |WARN|rror"
  done
done; } > $O/tp-ab.txt 2>&1; cat $O/tp-ab.txt
rm -rf /tmp/m20b
echo "total ${SECONDS}s"
