#!/bin/bash
# session 19 call 13: a 2-3-row step's experts row by row on the batch-1 kernels (LLMR_GPTOSS_BATCH_MOE_PER_ROW).
# Kernel checks (whole gptoss_kernels), bench/throughput at 8 streams =0 vs default twice with the per-part profile,
# and once without it; then the gate's selftest, parity, batching and serving steps (--full).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 300 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"; grep -E "^FAIL|moe rows|checks, " $O/kernels.txt | head -8
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  for v in 0 3; do
    echo "=== LLMR_GPTOSS_BATCH_MOE_PER_ROW=$v (profile)"; LLMR_GPTOSS_BATCH_PROFILE=1 LLMR_GPTOSS_BATCH_MOE_PER_ROW=$v timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8 2>&1 | grep -E "^ +8 +[0-9]+ |^ +(2-3|4-7|8-15) |WARN|rror"
  done
done
for v in 0 3 0 3; do
  echo "=== LLMR_GPTOSS_BATCH_MOE_PER_ROW=$v"; LLMR_GPTOSS_BATCH_MOE_PER_ROW=$v timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8 2>&1 | grep -E "^ +8 +[0-9]+ |WARN|rror"
done; } > $O/tp-ab.txt 2>&1; cat $O/tp-ab.txt
rm -rf /tmp/m20b
echo "bench done ${SECONDS}s"
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --steps "selftest parity batching serving" --full 2>&1 | tail -8
cp -r /tmp/g/gate $O/ 2>/dev/null
echo "total ${SECONDS}s"
