#!/bin/bash
# Session 36 call 3 (H200), main as landed (cfe564b) and one variant, speed only plus the variant's kernel checks:
# 1) ldg: the T = 1 down kernel's loads from the experts' tiled copy through L1 (__ldg; was __ldcs): a lane's two
#    rows' units share 32-byte sectors (session 33 item 3). gptoss_kernels --moe-decode-timing (the tiled = checkpoint
#    bit-for-bit checks, and the T = 1 MoE block's times) for both, then bench/decode A B C A B C with C = the checkpoint's
#    layout (LLMR_GPTOSS_MOE_TILED=0), the bound the tiled copy loses 1.3-1.9% to;
# 2) with the expert cache, the prompt kernel's chunk limit (LLMR_GPTOSS_PROMPT_MMA; default 768): call 2 gave 1,024
#    tokens 32.71 ms on cuBLAS on the cache against 28.85 on the kernel without it;
# 3) without the cache, the kernel's raster group (LLMR_GPTOSS_PROMPT_MMA_GROUP, 8) and 128-row threshold (_WIDE, 64).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for v in base ldg; do
  K=$B/tests/gpu/gptoss_kernels; [ $v = ldg ] && K=/tmp/B/alt/ldg/tests/gpu/gptoss_kernels
  timeout 120 $K --moe-decode-timing > $O/moe-decode-$v.txt 2>&1
  echo "moe-decode-timing $v rc=$?: $(tail -1 $O/moe-decode-$v.txt) ${SECONDS}s"
  grep -iE "timing|FAIL" $O/moe-decode-$v.txt | grep -iE "down|FAIL" | head -6 | cut -c1-200
done
for r in 1 2; do for v in base ldg ckpt; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; [ $v = ldg ] && E=/tmp/B/alt/ldg/engines/gptoss_cuda/libgptoss_cuda.so
  T=2; [ $v = ckpt ] && T=0
  LLMR_GPTOSS_MOE_TILED=$T timeout 60 $B/bench/decode --engine $E --model /tmp/m20b --contexts 128,1024 --tokens 64 > /tmp/d.txt 2>&1
  echo "decode $v $r rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/d.txt | awk '{printf "%s %s | ", $1, $2}')"
  { echo "== $v $r"; cat /tmp/d.txt; } >> $O/decode.txt
done; done
for r in 1 2; do for m in 768 1024 1536 2048; do
  LLMR_GPTOSS_PROMPT_MMA=$m timeout 60 $B/bench/prefill --model /tmp/m20b --lengths 768,1024,1280,1536,2048 --reps 3 > /tmp/pf.txt 2>&1
  echo "cached mma<=$m $r rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s | ", $1, $2}')"
  { echo "== cached mma $m $r"; cat /tmp/pf.txt; } >> $O/prefill.txt
done; done
for r in 1 2; do for gw in 8:64 4:64 16:64 8:48 8:96; do
  LLMR_GPTOSS_EXPERT_CACHE=0 LLMR_GPTOSS_PROMPT_MMA_GROUP=${gw%:*} LLMR_GPTOSS_PROMPT_MMA_WIDE=${gw#*:} timeout 60 \
    $B/bench/prefill --model /tmp/m20b --lengths 1024,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "uncached group:wide $gw $r rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s | ", $1, $2}')"
  { echo "== uncached $gw $r"; cat /tmp/pf.txt; } >> $O/prefill.txt
done; done
echo "total ${SECONDS}s"
