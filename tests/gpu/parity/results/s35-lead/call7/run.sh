#!/bin/bash
# Session 35 call 7 (H200): the prompt kernel's defaults with the expert cache: cuBLAS on the cache against the kernel
# at 384..1,024 tokens with 128-row tiles from 96 rows an expert on average (LLMR_GPTOSS_PROMPT_MMA_WIDE, the default),
# 64 and 40 (call 5: at 640 tokens the 64-row tiles lose to cuBLAS, 25.0-25.2 against 22.7 ms).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for v in cublas w96 w64 w40 cublas w64; do
  M=1024 W=${v#w}; [ $v = cublas ] && M=0 W=96
  LLMR_GPTOSS_PROMPT_MMA=$M LLMR_GPTOSS_PROMPT_MMA_WIDE=$W timeout 60 $B/bench/prefill --model /tmp/m20b \
    --lengths 384,512,640,768,1024 --reps 3 > /tmp/pf.txt 2>&1
  echo "$v rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s ms | ", $1, $2}') ${SECONDS}s"
  { echo "== $v"; cat /tmp/pf.txt; } >> $O/prefill.txt
done
