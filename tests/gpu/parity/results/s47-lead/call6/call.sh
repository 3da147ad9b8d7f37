#!/bin/bash
# Session 47, call 6 (measurements only, main 4ee3f09, the last device time): the landed T = 1 gate_up's SASS and its
# warp stalls by SASS line (as call 3), for session 48's item 1 (what is left of each stage's setup).
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
cuobjdump -sass -fun _Z23moe_gate_up_ring_kernelILi2ELb1ELb1EEvPKfPKiPKhS5_PKtiiffPfii8mr_route $EN > /tmp/gu.s 2>&1
xz -9 -c /tmp/gu.s > $O/gate-up-sass.s.xz
timeout 100 ncu --set full --import-source no --cache-control none --clock-control none --kernel-name-base demangled \
  -k 'regex:gate_up_ring' --launch-skip 240 -c 1 -o /tmp/gu $B/bench/decode --engine $EN --model $M20B --contexts 128 \
  --tokens 16 > /tmp/ncu.log 2>&1
echo "ncu rc=$? ${SECONDS}s"
ncu -i /tmp/gu.ncu-rep --page source --csv --print-source sass > /tmp/gu-source.csv && xz -9 -c /tmp/gu-source.csv > $O/gate-up-source.csv.xz
echo "total ${SECONDS}s"
