#!/bin/bash
# Session 48, call 5: both tensor-core downs with each CTA's two stages computed together (mi_stage2_tiled: each
# chunk's activation fragments read once for both tiles, two independent mma chains a warp; the same bits as one stage
# at a time). Calls 3-4: with the weights in L2 the ring still took ~11.5 us, its 2 stages ~3 us each at 3 CTAs an SM,
# so its compute chain bounds it. The build "F2" = main's cluster form + fused-two-stages.diff; alts "cl" (main's
# cluster form) and "C2" (call 3's counter form + the same, counter-fused.diff); "ffma" = LLMR_GPTOSS_DOWN_RING=0.
# Predicted: down -1-1.5 us against each one-stage form (F2 ~11.2-11.7, C2 ~10.8-11.2 us; ffma 11.9), the step
# -0.5-1.3% against ffma. The full gate on F2 if it beats ffma by 0.3% at 128 keys.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt E=engines/gptoss_cuda/libgptoss_cuda.so
timeout 90 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe-decode.txt 2>&1; rc=$?; echo "checks rc=$rc ${SECONDS}s"
grep -h "FAIL\|ring down\|timing down\|checks," $O/moe-decode.txt | cut -c1-220
[ $rc = 0 ] || { tail -5 $O/moe-decode.txt; exit 1; }
timeout 200 tests/gpu/decode_ab.sh --log $O/decode-ab.txt ffma=$EN:LLMR_GPTOSS_DOWN_RING=0 F2=$EN C2=$A/c2/$E cl=$A/cl/$E \
  ffma F2 C2 cl cl C2 F2 ffma ffma F2 C2 | tee /tmp/ab.txt
echo "ab ${SECONDS}s"
for v in ffma F2 C2; do
  EE=$EN; [ $v = C2 ] && EE=$A/c2/$E
  echo "ncu $v: $( ( [ $v = ffma ] && export LLMR_GPTOSS_DOWN_RING=0; timeout 60 tests/gpu/ncu_durations.sh --csv /tmp/ncu-$v.csv \
    'moe_down' -- $B/bench/decode --engine $EE --model $M20B --contexts 128 --tokens 16) )"
done
echo "ncu ${SECONDS}s"
gain=$(awk '$1 == "F2" && $3 ~ /^-/ { v = substr($3, 2); sub(/%/, "", v); if (v + 0 >= 0.3) print 1 }' /tmp/ab.txt)
if [ "$gain" = 1 ]; then
  timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
  echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
  grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
  grep -h "ring down\|timing down" /tmp/g/gate/kernels.txt 2>/dev/null | cut -c1-200
fi
echo "total ${SECONDS}s"
