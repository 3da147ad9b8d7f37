#!/bin/bash
# Session 52, call 6: steps of up to 2 rows take the batch-1 graph's attention kernel (gptoss_attention_at: 128 blocks of
# the one-token split kernel, one wave) where that graph would (sliding layers; full layers below split_from keys), so
# each row's attention is its lone result bit for bit (LLMR_GPTOSS_BATCH_ATTN_LONE, default 2; 0 = attention_rows as
# before). Predicted (--batch-checks: B = 2 sliding 7.4 us on attention_rows against 5.0 on attention_at): a 2-row
# step's attention 0.25 -> ~0.17 ms (BATCH_PROFILE), 2 streams' step rate +2.5-3%, 3-4 streams +0-1% (their 2-row steps).
# The A/B first (=0 / default, A B A B), then the full gate on exactly this build.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
for v in 0 2 0 2; do
  LLMR_GPTOSS_BATCH_ATTN_LONE=$v timeout 40 $B/bench/throughput --engine $EN --model $M20B --streams 2,3 > /tmp/tp.txt 2>&1
  echo "attn_lone $v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done | tee $O/ab.txt
for v in 0 2; do
  LLMR_GPTOSS_BATCH_PROFILE=1 LLMR_GPTOSS_BATCH_ATTN_LONE=$v timeout 40 $B/bench/throughput --engine $EN --model $M20B \
    --streams 2 > $O/profile-lone$v.txt 2>&1
  echo "profile lone $v: $(grep -E '^ +2-3 ' $O/profile-lone$v.txt)"
done
echo "ab ${SECONDS}s"
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -6 | cut -c1-250
echo "total ${SECONDS}s"
