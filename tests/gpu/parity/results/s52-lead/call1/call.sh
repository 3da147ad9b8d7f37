#!/bin/bash
# Session 52, call 1: the review mends' build (linear.cu's row-instance picker and gemv1_fin_make, the ring's row
# offsets in one branch, one dbg_router call) with a new switch, LLMR_GPTOSS_BATCH_HEAD_ROWS (default 0 = off): the
# small batched steps' lm_head on gptoss_gemv1_rows (each row's logits bit for bit its lone gemv1's) instead of cuBLAS.
# Predicted: lm_head of a 2-3-row step 0.31 -> ~0.27 ms (1.16 GB at ~4.3 TB/s, as batch 1's 264 us), 2 / 3 streams'
# step rate +1.5-2%, 4 streams +0.5-1% (gemv1_rows<4>: 4 loads in flight a lane).
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 90 $B/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1
echo "rows-checks rc=$?: $(tail -1 $O/rows-checks.txt); $(grep 'timing gemv1 of 2 rows K=2880' $O/rows-checks.txt) ${SECONDS}s"
for v in 0 4 0 4 0 4; do
  LLMR_GPTOSS_BATCH_HEAD_ROWS=$v timeout 40 $B/bench/throughput --engine $EN --model $M20B --streams 2,3,4 > /tmp/tp.txt 2>&1
  echo "head_rows $v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done | tee $O/ab.txt
echo "ab ${SECONDS}s"
for v in 0 4; do
  LLMR_GPTOSS_BATCH_PROFILE=1 LLMR_GPTOSS_BATCH_HEAD_ROWS=$v timeout 40 $B/bench/throughput --engine $EN --model $M20B \
    --streams 2,4 > $O/profile-head$v.txt 2>&1
done
LLMR_GPTOSS_BATCH_PROFILE=1 timeout 60 $B/bench/throughput --engine $EN --model $M20B --streams 64 > $O/profile-64.txt 2>&1
grep -A12 "^2 streams" $O/profile-head0.txt | head -14
grep -A12 "^2 streams" $O/profile-head4.txt | head -14
echo "total ${SECONDS}s"
