#!/bin/bash
# session 25 call 14 (step 52): the batched attention's K and V loads as two cp.async groups (V's load overlaps the
# scores): the batch kernel checks (bit for bit as before), bench/throughput 32 / 64 streams old / new A B A B
# (build/old: main 9fa4e9d), bench/decode old / new.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 100 $B/tests/gpu/gptoss_kernels --batch-checks > $O/checks.txt 2>&1; echo "batch-checks rc=$? ${SECONDS}s $(tail -1 $O/checks.txt)"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for v in old new old new; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; [ $v = old ] && E=$B/old/libgptoss_cuda.so
  LLMR_GPTOSS_BATCH_PROFILE=1 timeout 60 $B/bench/throughput --model /tmp/m20b --engine $E --streams 32,64 > /tmp/t.txt 2>&1; rc=$?
  { echo "=== $v rc=$rc"; cat /tmp/t.txt; } >> $O/tp.txt
  echo "$v rc=$rc ${SECONDS}s"; grep -E "^ +(32|64) +[0-9]+ +[0-9]+ |^ +(32-63|64) +[0-9]+ " /tmp/t.txt
done
for v in old new; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; [ $v = old ] && E=$B/old/libgptoss_cuda.so
  timeout 60 $B/bench/decode --model /tmp/m20b --engine $E > /tmp/d.txt 2>&1; echo "decode $v rc=$?"; grep -E "^ +(128|1024|4096) " /tmp/d.txt
  { echo "=== decode $v"; cat /tmp/d.txt; } >> $O/decode.txt
done
echo "total ${SECONDS}s"
