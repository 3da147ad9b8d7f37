#!/bin/bash
# session 24 call 6: call 5 found the 20b batching check's greedy request 2 parting in 3 of 10 runs with fuse 3 and 4 of
# 10 with fuse 4: is it so on main as session 23 left it (69dcd24, its engine built for this call) too? 7 runs each,
# alternating session 23's engine and this build (default, fuse 4), one model.
O=$OUT; mkdir -p /tmp/B /tmp/E /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && xz -dc .gpu-lead/pkg/s23eng.tar.xz | tar -C /tmp/E -xf -
tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for i in 1 2 3 4 5 6 7; do for eng in s23 s24; do
  so=$B/engines/gptoss_cuda/libgptoss_cuda.so; [ $eng = s23 ] && so=/tmp/E/gptoss_cuda/libgptoss_cuda.so
  timeout 100 $B/tests/gpu/gptoss_batching --engine $so --model /tmp/m20b > /tmp/b.txt 2>&1; rc=$?
  { echo "=== run $i engine $eng rc=$rc"; cat /tmp/b.txt; } >> $O/batching.txt
  echo "run $i $eng rc=$rc ${SECONDS}s $(tail -1 /tmp/b.txt) | $(grep -E '^FAIL' /tmp/b.txt | cut -c1-100)"
done; done
echo "total ${SECONDS}s"
