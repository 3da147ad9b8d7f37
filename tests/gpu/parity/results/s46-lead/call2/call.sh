#!/bin/bash
# Session 46, call 2: three same-bits forms that take round trips out of the T = 1 kernels' prologues, each as an
# alt engine against main e4b04b4 (alt "main"), and all three together (the build, "L"), then the full gate on L:
#   g1:  gemv1-prologue.diff: o_proj's (and lm_head's) x staged with all loads before the stores (was a loop, a round
#        trip a pass: 4 for o_proj), lane 0's bias kept raw (its conversion made the warp wait before x's loads), the
#        first row's router weight loaded with them (was loaded after the sums and used at once)
#   qn:  qkv-prologue.diff: the prologue's 28 loads all issued before any conversion or product (dep & zero)
#   dng: ../../s45-lead/next/down-ng.diff: the T = 1 down's activation loads unpredicated at G = 1 (call 1: -0.3%)
# Predicted: g1 o_proj 14.4 -> ~13.0-13.6 us, batch-1 -0.8-1.6%; qn q/k/v 12.8 -> ~12.2-12.5, -0.4-0.8%; L the sum.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt
( mkdir -p /tmp/sass && cd /tmp/sass &&
  for k in _Z17qkv_decode_kernelPKfPKtfS2_S2_S2_S2_S2_S2_iiiPKiS0_fPf9gptoss_kvi \
           _Z12gemv1_kernelILb1EEvPKfPKtS3_iiPfiiS1_S4_9gemv1_fin _Z12gemv1_kernelILb0EEvPKfPKtS3_iiPfiiS1_S4_9gemv1_fin; do
    cuobjdump -sass -fun $k $EN > L-${k:0:30}.s 2>&1
  done
  tar cJf $O/sass.tar.xz *.s ) &
E=engines/gptoss_cuda/libgptoss_cuda.so
tests/gpu/decode_ab.sh --log $O/decode-ab.txt L=$EN main=$A/main/$E g1=$A/g1/$E qn=$A/qn/$E dng=$A/dng/$E \
  L main g1 qn dng main L qn g1 dng L main
echo "ab ${SECONDS}s"
for v in L main; do
  EE=$EN; [ $v = main ] && EE=$A/main/$E
  echo "ncu $v: $(timeout 60 tests/gpu/ncu_durations.sh --csv $O/ncu-$v.csv 'qkv_decode|gemv1|moe_down' -- \
    $B/bench/decode --engine $EE --model $M20B --contexts 128 --tokens 16)"
  xz -9 $O/ncu-$v.csv
done
echo "ncu ${SECONDS}s"
wait
timeout $((585 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
if [ $SECONDS -lt 545 ]; then
  timeout $((590 - SECONDS)) $B/bench/throughput --engine $EN --model $M20B --streams 1,8,32,64 > $O/throughput.txt 2>&1
  echo "throughput rc=$? ${SECONDS}s"; grep -E "^ +(1|8|32|64) +[0-9]+ +[0-9]+ " $O/throughput.txt
fi
echo "total ${SECONDS}s"
