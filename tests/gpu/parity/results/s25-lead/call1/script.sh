#!/bin/bash
# session 25 call 1: (a) bench/decode's new VRAM and p50/p99 columns, first run on a GPU; (b) the 20b batching
# check's flake with the log-probability trace (s24-batching-trace) and the scheduler trace (LLMR_GPTOSS_SCHED_TRACE=1),
# up to 8 runs; (c) s24-route-in-router (build/route): its kernel checks, 64 streams A B A B against main.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 100 $B/bench/decode --model /tmp/m20b > $O/decode.txt 2>&1; echo "decode rc=$? ${SECONDS}s"; cat $O/decode.txt | tail -12
for i in 1 2 3 4 5 6 7 8; do
  LLMR_GPTOSS_SCHED_TRACE=1 timeout 150 $B/tests/gpu/gptoss_batching --model /tmp/m20b > /tmp/b.txt 2>&1; rc=$?
  { echo "=== run $i rc=$rc"; cat /tmp/b.txt; } >> $O/batching.txt
  echo "run $i rc=$rc ${SECONDS}s $(tail -1 /tmp/b.txt) | $(grep -E '^FAIL' /tmp/b.txt | cut -c1-160)"
  grep "trace request" /tmp/b.txt | cut -c1-400
  [ $SECONDS -gt 200 ] && break
done
timeout 60 $B/route/gptoss_kernels --batch-checks > $O/route-kernels.txt 2>&1; echo "route batch-checks rc=$? ${SECONDS}s $(tail -1 $O/route-kernels.txt)"
for v in main route main route; do
  if [ $v = main ]; then E=$B/engines/gptoss_cuda/libgptoss_cuda.so; f=4; else E=$B/route/libgptoss_cuda.so; f=5; fi
  LLMR_GPTOSS_BATCH_FUSE=$f timeout 80 $B/bench/throughput --model /tmp/m20b --engine $E --streams 64 > /tmp/t.txt 2>&1; rc=$?
  { echo "=== $v fuse $f rc=$rc"; cat /tmp/t.txt; } >> $O/tp.txt
  echo "$v fuse=$f rc=$rc ${SECONDS}s"; grep -E '^ +64 +[0-9]+ ' /tmp/t.txt
done
LLMR_GPTOSS_BATCH_FUSE=5 timeout 150 $B/tests/gpu/gptoss_batching --model /tmp/m20b --engine $B/route/libgptoss_cuda.so > /tmp/b.txt 2>&1; rc=$?
{ echo "=== route fuse 5 rc=$rc"; cat /tmp/b.txt; } >> $O/batching.txt
echo "route batching rc=$rc ${SECONDS}s $(tail -1 /tmp/b.txt) | $(grep -E '^FAIL' /tmp/b.txt | cut -c1-160)"
echo "total ${SECONDS}s"
