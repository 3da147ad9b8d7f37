#!/bin/bash
# session 25 call 13 (step 51): the dense GEMMs of at most 256 rows on cublasLt's first heuristic algorithm
# (LLMR_GPTOSS_TC_LT=0: GemmEx as before): bench/throughput 32 / 64 streams A B A B with the batch profile's
# parts, bench/prefill's 128 and 1,024; then the full gate.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for lt in 0 1 0 1; do
  LLMR_GPTOSS_TC_LT=$lt LLMR_GPTOSS_BATCH_PROFILE=1 timeout 60 $B/bench/throughput --model /tmp/m20b --streams 32,64 > /tmp/t.txt 2>&1; rc=$?
  { echo "=== lt $lt rc=$rc"; cat /tmp/t.txt; } >> $O/tp.txt
  echo "lt=$lt rc=$rc ${SECONDS}s"; grep -E "^ +(8|32|64) +[0-9]+ +[0-9]+ |^ +(8-15|16-31|32-63|64) +[0-9]+ " /tmp/t.txt
done
for lt in 0 1; do
  LLMR_GPTOSS_TC_LT=$lt timeout 60 $B/bench/prefill --model /tmp/m20b --lengths 128,1024 --reps 2 > /tmp/p.txt 2>&1; rc=$?
  { echo "=== prefill lt $lt rc=$rc"; cat /tmp/p.txt; } >> $O/prefill.txt; echo "prefill lt=$lt rc=$rc"; tail -4 /tmp/p.txt
done
rm -rf /tmp/m20b
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head
tar -C /tmp/g -czf $O/gate-logs.tgz gate
echo "total ${SECONDS}s"
