#!/bin/bash
# Session 46, call 5 (measurements only, main 27b712d, the last ~300 s of device time): material for the tiled
# gate_up's gap to the checkpoint layout's at batch 1 (call 4: 17.9 against 17.05 us a layer, the step -1.0-1.2% with
# the checkpoint's layout). SASS of both T = 1 gate_up kernels, and one launch of each under ncu --set full.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
( cd /tmp && for k in _Z23moe_gate_up_ring_kernelILi2ELb1ELb1EEvPKfPKiPKhS5_PKtiiffPfii8mr_route \
                      _Z23moe_gate_up_ring_kernelILi2ELb1ELb0EEvPKfPKiPKhS5_PKtiiffPfii8mr_route; do
    cuobjdump -sass -fun $k $EN > sass-${k:26:14}.s 2>&1
  done; tar cJf $O/sass-gate-up.tar.xz sass-*.s ) &
for T in 2 1; do
  LLMR_GPTOSS_MOE_TILED=$T timeout 100 ncu --set full --import-source no -k regex:gate_up_ring --launch-skip 240 -c 2 \
    -o $O/gate-up-tiled$T $B/bench/decode --engine $EN --model $M20B --contexts 128 --tokens 16 > $O/ncu-$T.log 2>&1
  echo "ncu mode $T rc=$? ${SECONDS}s"; tail -2 $O/ncu-$T.log
done
wait
ls -la $O; echo "total ${SECONDS}s"
