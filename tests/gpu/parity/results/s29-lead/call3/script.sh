#!/bin/bash
# session 29 call 3: the multi-block radix sampler (LLMR_GPTOSS_SAMPLER, default 1; 0 = the one-block kernel) and the
# step ahead: the gate's kernels (sampling against the CPU twin in both forms, sample_rows = one row at a time,
# timings), selftest, batching (tiny) and serving steps; bench/decode non-greedy A B (one-block / radix) at 128;
# bench/throughput 64 streams at temperature 1, A B.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --steps "kernels selftest batching serving" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL|timing sampling|timing greedy" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head -30
grep -hE "sampl" /tmp/g/gate/kernels.txt | cut -c1-200 | head -40
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for s in "--temperature 1" "--temperature 1 --top-p 0.9" "--temperature 1 --top-k 50"; do for v in 0 1; do
  LLMR_GPTOSS_SAMPLER=$v timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128 $s > /tmp/ds.txt 2>&1
  echo "decode sampler=$v $s rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ |^context" /tmp/ds.txt; cat /tmp/ds.txt >> $O/decode-sampling.txt
done; done
for v in 0 1; do
  LLMR_GPTOSS_SAMPLER=$v timeout 120 $B/bench/throughput --model /tmp/m20b --streams 64 --temperature 1 > $O/tp-t1-s$v.txt 2>&1; echo "throughput t1 sampler=$v rc=$? ${SECONDS}s"
  grep -E "^ +[0-9]+ |streams, wall" $O/tp-t1-s$v.txt | cut -c1-300
done
echo "total ${SECONDS}s"
