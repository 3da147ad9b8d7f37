#!/bin/bash
# session 31 call 5: what the experts' tiled layout in their place costs at load and in prefill, and a second A B of
# bench/throughput (in place / the checkpoint's layout, LLMR_GPTOSS_MOE_TILED=0).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for v in 2 0; do
  LLMR_GPTOSS_MOE_TILED=$v timeout 90 $B/bench/load --model /tmp/m20b --reps 3 > /tmp/l.txt 2>&1; echo "load tiled=$v rc=$? ${SECONDS}s"
  grep -vE "^gptoss_cuda: (warm|expert cache)" /tmp/l.txt | tail -8 | cut -c1-200; cat /tmp/l.txt >> $O/load-$v.txt
  LLMR_GPTOSS_MOE_TILED=$v timeout 90 $B/bench/prefill --model /tmp/m20b --lengths 128,512,1024,4096 > /tmp/p.txt 2>&1; echo "prefill tiled=$v rc=$? ${SECONDS}s"
  grep -E "^ +[0-9]+ " /tmp/p.txt | cut -c1-200; cat /tmp/p.txt >> $O/prefill-$v.txt
done
for v in 2 0; do
  LLMR_GPTOSS_MOE_TILED=$v timeout 90 $B/bench/throughput --model /tmp/m20b --streams 8,32,64 > /tmp/t.txt 2>&1; echo "throughput tiled=$v rc=$? ${SECONDS}s"
  grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ " /tmp/t.txt | cut -c1-220; cat /tmp/t.txt >> $O/tp-$v.txt
done
echo "total ${SECONDS}s"
