#!/bin/bash
# session 25 call 10 (step 50): the crossover of the batch-1 full layers' attention on gptoss_attention_rows (now with
# PDL at one row): bench/decode at contexts 128..4,096 with LLMR_GPTOSS_SPLIT_ATTN_FROM=1 (rows kernel from the first
# key), =0 (the short kernel everywhere), and LLMR_GPTOSS_DECODE_ATTN=0 (session 24's default: attention_decode from
# 1,536); A B C A B. Then the kernel checks and the self-test.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
C=128,256,384,512,768,1024,2048,4096
for v in rows short old rows short; do
  case $v in rows) E="LLMR_GPTOSS_SPLIT_ATTN_FROM=1";; short) E="LLMR_GPTOSS_SPLIT_ATTN_FROM=0";; old) E="LLMR_GPTOSS_DECODE_ATTN=0";; esac
  env $E timeout 150 $B/bench/decode --model /tmp/m20b --contexts $C > /tmp/d.txt 2>&1; rc=$?
  { echo "=== $v ($E) rc=$rc"; cat /tmp/d.txt; } >> $O/decode.txt
  echo "$v rc=$rc ${SECONDS}s"; grep -E "^ +[0-9]+ +[0-9]+ " /tmp/d.txt | awk '{printf "%s:%s ", $1, $3} END {print ""}'
done
timeout 200 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s $(tail -1 $O/kernels.txt)"; grep -E "^FAIL" $O/kernels.txt | head
timeout 120 $B/tests/gpu/gptoss_parity > $O/selftest.txt 2>&1; echo "selftest rc=$? ${SECONDS}s $(tail -1 $O/selftest.txt)"
echo "total ${SECONDS}s"
