#!/bin/bash
# session 25 call 9 (step 50 experiment): the batch-1 decode's attention on the batched step's kernel
# (LLMR_GPTOSS_DECODE_ATTN=1: full layers, =2: every layer) against the default, bench/decode A B C A B C at
# contexts 128 / 1,024 / 4,096; the self-test with each.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for a in 0 1 2 0 1 2; do
  LLMR_GPTOSS_DECODE_ATTN=$a timeout 100 $B/bench/decode --model /tmp/m20b > /tmp/d.txt 2>&1; rc=$?
  { echo "=== attn $a rc=$rc"; cat /tmp/d.txt; } >> $O/decode.txt
  echo "attn=$a rc=$rc ${SECONDS}s"; grep -E "^ +(128|1024|4096) " /tmp/d.txt
done
for a in 1 2; do
  LLMR_GPTOSS_DECODE_ATTN=$a timeout 120 $B/tests/gpu/gptoss_parity > /tmp/p.txt 2>&1; rc=$?
  { echo "=== selftest attn $a rc=$rc"; cat /tmp/p.txt; } >> $O/selftest.txt
  echo "selftest attn=$a rc=$rc ${SECONDS}s $(tail -1 /tmp/p.txt)"; grep -E "^FAIL" /tmp/p.txt | head -5
done
echo "total ${SECONDS}s"
