#!/bin/bash
# Session 32 call 3 (H200): the same as call 2 with gptoss_dense_stream's second form (cp.async ring of 4 stages for W and x) (the batched step's dense GEMMs on a kernel of our own, W streamed
# once) checked against the CPU and cuBLAS and timed at the step's shapes; then bench/throughput with it on
# (the build's default) and off (LLMR_GPTOSS_DENSE_STREAM=0), A B A B, and the 64-stream step's parts.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
timeout 120 $B/tests/gpu/gptoss_kernels --dense-stream-checks > $O/ds-checks.txt 2>&1; echo "checks rc=$? ${SECONDS}s"
grep -E "FAIL|checks,|^time" $O/ds-checks.txt | cut -c1-200
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2; do for ds in 1 0; do
  LLMR_GPTOSS_DENSE_STREAM=$ds timeout 90 $B/bench/throughput --model /tmp/m20b --streams 8,32,64 > $O/tp-ds$ds-$r.txt 2>&1
  echo "ds=$ds run $r rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ " $O/tp-ds$ds-$r.txt | cut -c1-130
done; done
for ds in 1 0; do
  LLMR_GPTOSS_BATCH_PROFILE=1 LLMR_GPTOSS_DENSE_STREAM=$ds timeout 60 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/prof-ds$ds.txt 2>&1
  echo "profile ds=$ds rc=$?"; grep -A9 "rows   steps" $O/prof-ds$ds.txt | cut -c1-150
done
echo "total ${SECONDS}s"
