#!/bin/bash
# session 18 call 18: where step 25's split attention starts to pay: bench/decode LLMR_GPTOSS_SPLIT_ATTN_FROM=0 vs =1024
# (call 17's build) at 1,536 / 2,048 / 3,072 keys, twice.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  for f in 0 1024; do
    echo "=== LLMR_GPTOSS_SPLIT_ATTN_FROM=$f"; LLMR_GPTOSS_SPLIT_ATTN_FROM=$f timeout 100 $B/bench/decode --model /tmp/m20b --contexts 1536,2048,3072 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
  done
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
rm -rf /tmp/m20b
echo "total ${SECONDS}s"
