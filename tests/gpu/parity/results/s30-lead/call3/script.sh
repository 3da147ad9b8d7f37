#!/bin/bash
# session 30 call 3: what the 64-row step would gain if the batched experts' arithmetic cost nothing. An experiment
# engine (alt/moediag) whose streaming expert kernel (moe_mma_stream.cu, F16 form) under LLMR_EXP_MOE_DIAG=1 loads
# every weight and scale as it does now but skips the decode and the mma (a sink keeps the loads); the staging and the
# epilogue stay. bench/throughput 64 streams: main, diag 0, diag 1, twice (tokens are garbage under diag 1; the
# synthetic model has no stop id, so the lengths are the same).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; A=/tmp/B/alt
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2; do for v in main d0 d1; do
  E=$A/moediag/engines/gptoss_cuda/libgptoss_cuda.so; d=${v#d}
  if [ $v = main ]; then E=$B/engines/gptoss_cuda/libgptoss_cuda.so; d=0; fi
  LLMR_EXP_MOE_DIAG=$d timeout 60 $B/bench/throughput --model /tmp/m20b --engine $E --streams 64 > /tmp/t.txt 2>&1; echo "throughput $v run $r rc=$? ${SECONDS}s"
  grep -E "^ +[0-9]+ |streams, wall|step" /tmp/t.txt | cut -c1-300; cat /tmp/t.txt >> $O/tp-$v.txt
done; done
echo "total ${SECONDS}s"
