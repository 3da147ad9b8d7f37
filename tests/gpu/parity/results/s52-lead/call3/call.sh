#!/bin/bash
# Session 52, call 3: call 2's K/V split of gptoss_attention_rows measured slower (64 rows, full layer 127.1 -> 137.0
# us): the V copies' page-table reads were re-issued after the K group's commit (its "memory" clobber). Now each copy's
# source is computed once before both groups (main); alt kv1 is the kernel as before (one group). Predicted: the split
# at least level with the one group, ~5-10% faster at 32-64 rows (V's round trip behind the scores).
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
ALT=/tmp/B/alt/kv1
for r in 1 2; do
  timeout 150 $B/tests/gpu/gptoss_kernels --batch-checks > $O/batch-checks-$r.txt 2>&1
  echo "batch-checks rc=$?: $(tail -1 $O/batch-checks-$r.txt) ${SECONDS}s"
  timeout 150 $ALT/tests/gpu/gptoss_kernels --batch-checks > $O/batch-checks-kv1-$r.txt 2>&1
  echo "batch-checks kv1 rc=$?: $(tail -1 $O/batch-checks-kv1-$r.txt) ${SECONDS}s"
  paste <(grep "timing attention_rows" $O/batch-checks-kv1-$r.txt | cut -c1-105) <(grep "timing attention_rows" $O/batch-checks-$r.txt | cut -c50-105)
done
echo "total ${SECONDS}s"
