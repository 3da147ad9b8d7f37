#!/bin/bash
# Session 52, call 2: the batched steps' attention (gptoss_attention_rows) with K's and V's copies in two groups, the
# scores and softmax waiting only for K (main, ARW_KV_SPLIT 1) against one group (alt kv1 = the same tree with
# ARW_KV_SPLIT 0, the kernel as before). Predicted: V's round trip hides behind the scores, a block's chunk
# ~10-15% shorter: the 64-row step's attention 1.04 -> ~0.90 ms, 32 / 64 streams' step rate +1.5-2%.
# Also LLMR_GPTOSS_BATCH_HEAD_ROWS=2 (lm_head of 2-row steps on gemv1_rows<2>): call 1 measured =4 at +0.6% for 2
# streams and -1% / -3% for 3 / 4 streams (gemv1_rows<4> slower than cuBLAS); =2 keeps only the gain.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
ALT=/tmp/B/alt/kv1
timeout 150 $B/tests/gpu/gptoss_kernels --batch-checks > $O/batch-checks.txt 2>&1
echo "batch-checks rc=$?: $(tail -1 $O/batch-checks.txt) ${SECONDS}s"
timeout 150 $ALT/tests/gpu/gptoss_kernels --batch-checks > $O/batch-checks-kv1.txt 2>&1
echo "batch-checks kv1 rc=$?: $(tail -1 $O/batch-checks-kv1.txt) ${SECONDS}s"
paste <(grep "timing attention_rows" $O/batch-checks-kv1.txt | cut -c1-105) <(grep "timing attention_rows" $O/batch-checks.txt | cut -c50-105)
for e in kv1 main kv1 main; do
  eng=$EN; [ $e = kv1 ] && eng=$ALT/engines/gptoss_cuda/libgptoss_cuda.so
  timeout 60 $B/bench/throughput --engine $eng --model $M20B --streams 8,32,64 > /tmp/tp.txt 2>&1
  echo "$e: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
  { echo "== $e"; cat /tmp/tp.txt; } >> $O/throughput.txt
done | tee $O/ab.txt
for v in 0 2 0 2; do
  LLMR_GPTOSS_BATCH_HEAD_ROWS=$v timeout 40 $B/bench/throughput --engine $EN --model $M20B --streams 2,3 > /tmp/tp.txt 2>&1
  echo "head_rows $v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
  { echo "== head $v"; cat /tmp/tp.txt; } >> $O/throughput-head.txt
done | tee -a $O/ab.txt
LLMR_GPTOSS_BATCH_PROFILE=1 timeout 60 $B/bench/throughput --engine $EN --model $M20B --streams 64 > $O/profile-64.txt 2>&1
grep -A9 "^64 streams" $O/profile-64.txt | tail -3
echo "total ${SECONDS}s"
