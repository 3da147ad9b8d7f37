#!/bin/bash
# Session 49, call 2: the build "N" = main + rows1-and-sample-host.diff: (1) the 2-3-row batched steps' gate_up and
# down in one launch each for all rows (gptoss_moe_gate_up_decode_dp4a_rows1, gptoss_moe_down_decode_rows1: each row's
# one-token problem on the grid's y, the same bits as a launch a row; LLMR_GPTOSS_MOE_ROWS1=0 goes back to a launch a
# row); (2) call 1's "smp" (a lone row's greedy id in one launch, written into the mapped host word) with its kernel
# check. Alt "base" = main (HEAD). Predicted: 2 / 3 streams' step rate +5-9% / +8-12% (two / four launches fewer a
# layer, each ~4-5 us of ramp and tail); batch 1 the token -0.4-0.6% (call 1's smp), the step unchanged. Then the full
# gate on N.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt E=engines/gptoss_cuda/libgptoss_cuda.so
for v in on off on off; do
  X=1; [ $v = off ] && X=0
  LLMR_GPTOSS_MOE_ROWS1=$X timeout 60 $B/bench/throughput --engine $EN --model $M20B --streams 2,3 > /tmp/tp-$v.txt 2>&1
  echo "rows1 $v: $(grep -E '^ +(2|3) +[0-9]+ +[0-9]+ ' /tmp/tp-$v.txt | awk '{ printf "%s streams %s out, step rate %s; ", $1, $5, $8 }')"
  cat /tmp/tp-$v.txt >> $O/throughput.txt
done | tee $O/rows1-ab.txt
echo "tp ${SECONDS}s"
timeout 120 tests/gpu/decode_ab.sh --log $O/decode-ab.txt base=$A/base/$E N=$EN base N N base base N | tee /tmp/ab.txt
grep -h "a token" $O/decode-ab.txt > $O/token-split.txt
echo "ab ${SECONDS}s"
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; cat $O/gate.txt | grep "^GATE"
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-250
grep -h "moe rows\|gptoss_sample_host" /tmp/g/gate/*.txt 2>/dev/null | head -12 | cut -c1-250
echo "total ${SECONDS}s"
