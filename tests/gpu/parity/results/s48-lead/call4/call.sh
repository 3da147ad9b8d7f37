#!/bin/bash
# Session 48, call 4: the tensor-core down with its 4 slots meeting in distributed shared memory (clusters of 4 CTAs,
# CTA g slot g; rank 0 adds the rows in order), no global round trip after the last stage. Call 3's source counters of
# the counter form: ~12% of the warp samples in its producer's tail (fence, atomic, the reads after it), and with the
# weights in L2 it took 11.4 us, so its own latency chain was what bounded it. "ffma" = LLMR_GPTOSS_DOWN_RING=0,
# "cl" = the default. Predicted: down 12.25 -> 10-11 us (ffma 11.9), the batch-1 step -1-2% against ffma. First the
# T = 1 MoE block's checks (stop on a failure or hang); the full gate on this build if cl is faster at 128 keys.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 90 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe-decode.txt 2>&1; rc=$?; echo "checks rc=$rc ${SECONDS}s"
grep -h "FAIL\|ring down\|timing down\|checks," $O/moe-decode.txt | cut -c1-220
[ $rc = 0 ] || { tail -5 $O/moe-decode.txt; exit 1; }
timeout 200 tests/gpu/decode_ab.sh --log $O/decode-ab.txt ffma=$EN:LLMR_GPTOSS_DOWN_RING=0 cl=$EN ffma cl cl ffma ffma cl cl ffma | tee /tmp/ab.txt
echo "ab ${SECONDS}s"
for v in ffma cl; do
  echo "ncu $v: $( ( [ $v = ffma ] && export LLMR_GPTOSS_DOWN_RING=0; timeout 60 tests/gpu/ncu_durations.sh --csv /tmp/ncu-$v.csv \
    'moe_down' -- $B/bench/decode --engine $EN --model $M20B --contexts 128 --tokens 16) )"
done
echo "ncu ${SECONDS}s"
faster=$(awk '$1 == "cl" && $3 ~ /^-/ { print 1 }' /tmp/ab.txt)
if [ "$faster" = 1 ]; then
  timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
  echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
  grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
  grep -h "ring down\|timing down" /tmp/g/gate/kernels.txt 2>/dev/null | cut -c1-200
  cp /tmp/g/gate/parity*.txt $O/ 2>/dev/null
fi
echo "total ${SECONDS}s"
