#!/bin/bash
# Session 50, call 4 (measurements only; nothing here can be gated this session): N2v2 = call 3's graph argmax with the
# last block's merge of the 1,056 parts over all its 256 threads (call 3: one warp, ~33 loads a lane in turn; the
# lm_head 264.8 -> 275.4 us alone, the step +0.8%). Predicted: the lm_head +1-3 us, the token -0.3-0.5% against base.
# Alt q4 = 4f37f45 with qkv_rows<2>'s loads in flight 6 -> 4 a lane (no spills: 20 bytes at 6), at 2-3 streams.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT E=engines/gptoss_cuda/libgptoss_cuda.so A=/tmp/B/alt
timeout 90 $B/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1; rc=$?
echo "rows checks rc=$rc: $(tail -1 $O/rows-checks.txt) ${SECONDS}s"; grep -E "^FAIL|argmax|lm_head" $O/rows-checks.txt | cut -c1-160
timeout 100 tests/gpu/decode_ab.sh --log $O/decode-ab.txt base=$A/base/$E N2v2=$EN base N2v2 N2v2 base base N2v2 | tee $O/ab.txt
grep -h "a token" $O/decode-ab.txt > $O/token-split.txt; cat $O/token-split.txt
echo "ab ${SECONDS}s"
for v in base q4 base q4; do
  timeout 40 $B/bench/throughput --engine $A/$v/$E --model $M20B --streams 2,3 > /tmp/tp.txt 2>&1
  echo "$v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/q4-throughput.txt
done | tee $O/q4-ab.txt
echo "total ${SECONDS}s"
