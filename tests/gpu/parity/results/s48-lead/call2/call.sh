#!/bin/bash
# Session 48, call 2: the T = 1 down on tensor cores through the ring (moe_down_ring_kernel: the gate_up ring's
# consumers on down's tiled copy, one stage a tile of one slot's expert, the 4 slots added in order by the last of a
# tile's 4 CTAs through a counter). One build: "ffma" = LLMR_GPTOSS_DOWN_RING=0 (main's down), "ring" = the default.
# Not the same bits (the activation's integer split, as the gate_up's). Predicted: down 12.0 -> 9-10.5 us, the
# batch-1 step -1.5-3%. If the ring is faster at 128 keys, the full gate on this build; else the kernel checks alone.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 200 tests/gpu/decode_ab.sh --log $O/decode-ab.txt ffma=$EN:LLMR_GPTOSS_DOWN_RING=0 ring=$EN ffma ring ring ffma ffma ring ring ffma | tee /tmp/ab.txt
echo "ab ${SECONDS}s"
for v in ffma ring; do
  echo "ncu $v: $( ( [ $v = ffma ] && export LLMR_GPTOSS_DOWN_RING=0; timeout 60 tests/gpu/ncu_durations.sh --csv /tmp/ncu-$v.csv \
    'gate_up_ring|moe_down' -- $B/bench/decode --engine $EN --model $M20B --contexts 128 --tokens 16) )"
done
echo "ncu ${SECONDS}s"
faster=$(awk '$1 == "ring" && $3 ~ /^-/ { print 1 }' /tmp/ab.txt)
if [ "$faster" = 1 ]; then
  timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
  echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
  grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
  grep -h "down T=1\|timing down" /tmp/g/gate/kernels.txt 2>/dev/null | cut -c1-200
else
  timeout 300 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"
  grep -h "FAIL\|down T=1\|timing down\|^[0-9]* checks" $O/kernels.txt | head -20 | cut -c1-200
fi
echo "total ${SECONDS}s"
