#!/bin/bash
# Session 32 call 5 (H200, main as landed): where the prompt path's experts cross over on this card. Call 4: at most
# 128 tokens on the streaming kernel (LLMR_GPTOSS_MOE_MMA_PREFILL=128; the cached default is 208, the H100's
# crossover) gave 32 / 64 streams +3-5%. bench/prefill at 32..256 tokens with the kernel up to 208 / 128 / 31
# (31: every chunk of 32+ tokens on the cache's cuBLAS GEMMs), then bench/throughput 208 / 128 / 31, A B C A B C.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for v in 208 128 31; do
  LLMR_GPTOSS_MOE_MMA_PREFILL=$v timeout 90 $B/bench/prefill --model /tmp/m20b --lengths 32,48,64,96,128,160,192,208,256 --reps 5 > $O/prefill-$v.txt 2>&1
  echo "prefill max=$v rc=$? ${SECONDS}s: $(grep -E '^ +[0-9]+ +[0-9.]+ ' $O/prefill-$v.txt | awk '{printf "%s:%s ", $1, $2}')"
done
for r in 1 2; do for v in 208 128 31; do
  LLMR_GPTOSS_MOE_MMA_PREFILL=$v timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8,32,64 > $O/tp-$v-$r.txt 2>&1
  echo "tp max=$v run $r rc=$? ${SECONDS}s: $(grep -E '^ +(8|32|64) +[0-9]+ +[0-9]+ ' $O/tp-$v-$r.txt | awk '{printf "%s %s (%s) ", $1, $5, $NF}')"
  grep -E "^[0-9]+ streams, wall" $O/tp-$v-$r.txt | sed -n 3p | cut -c1-120
done; done
echo "total ${SECONDS}s"
