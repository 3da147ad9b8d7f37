#!/bin/bash
# Session 49, call 3: the landing candidate "N" = main + rows1-and-sample-host.diff: call 2's build with the rows form of
# down behind a template flag (ROWS), so that every batch-1 kernel's PTX equals main's (checked here: only names
# differ). Predicted: batch 1 the step as main (call 2 had +0.3% from a run-time test of blockIdx.y in down) and the
# token -0.4-0.6% (the one-launch greedy sampler); 2 / 3 streams as call 2 (+9% / +15% step rate). Then: where the
# per-row MoE should end now that it is cheaper, 4-6 streams with the tensor-core experts from 6 or 8 rows instead of 4
# (LLMR_GPTOSS_MOE_MMA_MIN_ROWS, LLMR_GPTOSS_BATCH_MOE_PER_ROW). Then the full gate on N.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt E=engines/gptoss_cuda/libgptoss_cuda.so
timeout 120 tests/gpu/decode_ab.sh --log $O/decode-ab.txt base=$A/base/$E N=$EN base N N base base N | tee /tmp/ab.txt
grep -h "a token" $O/decode-ab.txt > $O/token-split.txt
echo "ab ${SECONDS}s"
for v in d r6 r8 d r6 r8; do
  case $v in d) X="" ;; r6) X="LLMR_GPTOSS_MOE_MMA_MIN_ROWS=6 LLMR_GPTOSS_BATCH_MOE_PER_ROW=5" ;;
    r8) X="LLMR_GPTOSS_MOE_MMA_MIN_ROWS=8 LLMR_GPTOSS_BATCH_MOE_PER_ROW=7" ;; esac
  env $X timeout 60 $B/bench/throughput --engine $EN --model $M20B --streams 2,3,4,6 > /tmp/tp-$v.txt 2>&1
  echo "$v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp-$v.txt | awk '{ printf "%s streams %s out, step rate %s; ", $1, $5, $8 }')"
  { echo "== $v"; cat /tmp/tp-$v.txt; } >> $O/throughput.txt
done | tee $O/rows-threshold.txt
echo "tp ${SECONDS}s"
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-250
echo "total ${SECONDS}s"
