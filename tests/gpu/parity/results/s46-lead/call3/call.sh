#!/bin/bash
# Session 46, call 3: three more same-bits forms that take a round trip out of a T = 1 kernel's start, each as an alt
# engine against main 27b712d (alt "main"), and all three together (the build, "L"), then the full gate on L:
#   gu: gate-up-count.diff: the ring gate_up's consumers no longer wait for the group count before their activation
#       loads (the product was computed before the role split); the producer reads the first tile's expert id with
#       the count (one round trip before its first copy, not two)
#   dn: down-first-task.diff: the T = 1 down reads its first task's group entries with the group count, and the
#       epilogue's reads without a branch (the count's use came right after its load, then the entries, then weights)
#   qk: qkv-no-branch.diff: q/k/v's bias pair and frequency read by every lane (no branch), pos through dz; 3 blocks
#       an SM by launch bounds (80 registers; 86 without)
# Predicted: gu gate_up 17.9 -> ~17.4-17.6 us, dn down 12.05 -> ~11.6-11.8, qk q/k/v 12.8 -> ~12.4-12.6; each
# -0.3-0.7% a batch-1 step, L ~-1-1.5%.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt E=engines/gptoss_cuda/libgptoss_cuda.so
( mkdir -p /tmp/sass && cd /tmp/sass &&
  for k in _Z17qkv_decode_kernelPKfPKtfS2_S2_S2_S2_S2_S2_iiiPKiS0_fPf9gptoss_kvi \
           _Z23moe_gate_up_ring_kernelILi2ELb1ELb1EEvPKfPKiPKhS5_PKtiiffPfii8mr_route \
           _Z22moe_down_decode_kernelILi1ELi4ELb1ELi90ELb1EEvPKfPKiiS1_PKhS5_PKtiiPfi; do
    cuobjdump -sass -fun $k $EN > L-${k:0:30}.s 2>&1
  done
  tar cJf $O/sass.tar.xz *.s ) &
tests/gpu/decode_ab.sh --log $O/decode-ab.txt L=$EN main=$A/main/$E gu=$A/gu/$E dn=$A/dn/$E qk=$A/qk/$E \
  L main gu dn qk main L qk dn gu L main
echo "ab ${SECONDS}s"
for v in L main; do
  EE=$EN; [ $v = main ] && EE=$A/main/$E
  echo "ncu $v: $(timeout 60 tests/gpu/ncu_durations.sh --csv $O/ncu-$v.csv 'qkv_decode|gate_up|moe_down|gemv1|attention' -- \
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
