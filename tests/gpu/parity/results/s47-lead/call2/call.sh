#!/bin/bash
# Session 47, call 2 (measurements only): ALU work moved to the FMA pipe in the T = 1 expert loops, the same bits.
#   main: 54b8fe6
#   ms:   gate_up's tensor-core consumers start each chunk's odd accumulator columns at 1.5 * 2^23 (the int32 -> fp32
#         conversion becomes one exact fp32 subtraction, an FADD for an I2FP)
#   mg:   ms + the selectors' w >> 16 as IMAD.HI (w * 2^16's high word) for SHF
#   dl:   mg + the fp32 GEMVs' table decode pairs nibbles (i, i + 4), signs placed by one shift a pair (the T = 1 down;
#         11 ALU instructions a word for 15; ptxas spills 64 B where it spilled 24 at 80 registers)
# Predicted: ms/mg gate_up 17.9 -> ~16.5-17.3 us, the batch-1 step -0.7-1.8%; dl down 12.1 -> ~11.3-12.1 us, 0 to -1.5%.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt E=engines/gptoss_cuda/libgptoss_cuda.so
GU=_Z23moe_gate_up_ring_kernelILi2ELb1ELb1EEvPKfPKiPKhS5_PKtiiffPfii8mr_route
DN=_Z22moe_down_decode_kernelILi1ELi4ELb1ELi90ELb1EEvPKfPKiiS1_PKhS5_PKtiiPfi
( mkdir -p /tmp/sass && cd /tmp/sass &&
  for v in main ms mg dl; do cuobjdump -sass -fun $GU $A/$v/$E > gu-$v.s 2>&1; done
  for v in main dl; do cuobjdump -sass -fun $DN $A/$v/$E > dn-$v.s 2>&1; done
  tar cJf $O/sass.tar.xz *.s ) &
tests/gpu/decode_ab.sh --log $O/decode-ab.txt main=$A/main/$E ms=$A/ms/$E mg=$A/mg/$E dl=$A/dl/$E \
  main ms mg dl dl mg ms main main ms mg dl
echo "ab ${SECONDS}s"
for v in main mg dl; do
  echo "ncu $v: $(timeout 60 tests/gpu/ncu_durations.sh --csv $O/ncu-$v.csv 'gate_up_ring|moe_down' -- \
    $B/bench/decode --engine $A/$v/$E --model $M20B --contexts 128 --tokens 16)"
  xz -9 $O/ncu-$v.csv
done
echo "ncu ${SECONDS}s"
wait
timeout 200 $A/dl/tests/gpu/gptoss_kernels > $O/kernels-dl.txt 2>&1
echo "kernels dl rc=$? ${SECONDS}s: $(tail -1 $O/kernels-dl.txt)"; grep -a "^FAIL" $O/kernels-dl.txt | head -5 | cut -c1-200
echo "total ${SECONDS}s"
