#!/bin/bash
# Session 46, call 1: land s45-lead/next/attention-vlqk.diff. The package: main 8a6dc61 + attention-vlqk.diff (the
# build), alt "main" (8a6dc61), alt "dng" (vlqk + s45-lead/next/down-ng.diff). First the A/B and the full gate on
# the build (what landing needs), then, in what time is left: the dng probe, every kernel's ncu duration on the
# build, its throughput. SASS of the build's T = 1 kernels and dng's down, for reading here.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
EM=/tmp/B/alt/main/engines/gptoss_cuda/libgptoss_cuda.so ED=/tmp/B/alt/dng/engines/gptoss_cuda/libgptoss_cuda.so
( mkdir -p /tmp/sass && cd /tmp/sass &&
  for k in _Z22attention_split_kernelPKf9gptoss_kvPKtiPKiiiiPfi \
           _Z17qkv_decode_kernelPKfPKtfS2_S2_S2_S2_S2_S2_iiiPKiS0_fPf9gptoss_kvi \
           _Z12gemv1_kernelILb1EEvPKfPKtS3_iiPfiiS1_S4_9gemv1_fin \
           _Z23moe_gate_up_ring_kernelILi2ELb1ELb1EEvPKfPKiPKhS5_PKtiiffPfii8mr_route \
           _Z22moe_down_decode_kernelILi1ELi4ELb1ELi90ELb1EEvPKfPKiiS1_PKhS5_PKtiiPfi \
           _Z22moe_down_decode_kernelILi1ELi2ELb1ELi90ELb1EEvPKfPKiiS1_PKhS5_PKtiiPfi; do
    cuobjdump -sass -fun $k $EN > new-${k:0:40}.s 2>&1
  done
  for k in _Z22moe_down_decode_kernelILi1ELi4ELb1ELi90ELb1EEvPKfPKiiS1_PKhS5_PKtiiPfi \
           _Z22moe_down_decode_kernelILi1ELi2ELb1ELi90ELb1EEvPKfPKiiS1_PKhS5_PKtiiPfi; do
    cuobjdump -sass -fun $k $ED > dng-${k:0:40}.s 2>&1
  done
  tar cJf $O/sass.tar.xz *.s ) &
tests/gpu/decode_ab.sh --log $O/decode-ab.txt new=$EN main=$EM new main main new
echo "ab ${SECONDS}s"
timeout $((585 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
wait
if [ $SECONDS -lt 480 ]; then
  tests/gpu/decode_ab.sh --log $O/decode-dng.txt new=$EN dng=$ED dng2=$ED:LLMR_GPTOSS_DOWN_R4=0 new dng dng2 dng new
  echo "dng ${SECONDS}s"
fi
if [ $SECONDS -lt 520 ]; then
  timeout $((585 - SECONDS)) tests/gpu/ncu_durations.sh --skip 4000 --count 250 --csv $O/ncu-all.csv . -- \
    $B/bench/decode --engine $EN --model $M20B --contexts 128 --tokens 64 | tr ';' '\n'
  xz -9 $O/ncu-all.csv; echo "ncu ${SECONDS}s"
fi
if [ $SECONDS -lt 545 ]; then
  timeout $((590 - SECONDS)) $B/bench/throughput --engine $EN --model $M20B --streams 1,8,32,64 > $O/throughput.txt 2>&1
  echo "throughput rc=$? ${SECONDS}s"; grep -E "^ +(1|8|32|64) +[0-9]+ +[0-9]+ " $O/throughput.txt
fi
echo "total ${SECONDS}s"
