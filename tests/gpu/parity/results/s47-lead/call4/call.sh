#!/bin/bash
# Session 47, call 4: the T = 1 gate_up's epilogue on its producer warp (alt "main" = 54b8fe6, the build "L" = main +
# the change), then the full gate on L. Call 3's source counters put 8.2% of the kernel's warp samples at the consumers'
# per-stage barrier (all 8 warps meet so that warp 0 can add their row sums and write the stage's activations, and the
# next stage's barrier then waits for warp 0's epilogue) and ~100 instructions a stage-warp in the stage's setup (the
# tile's group and pair, an integer division, the biases). Now the consumers only arrive at a named barrier after
# writing their sums; the producer warp, idle between its copies, adds them in the same order and writes the
# activations two stages behind (the same bits). Predicted: gate_up 17.8 -> 16.5-17.2 us, the batch-1 step -0.8-1.8%.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt E=engines/gptoss_cuda/libgptoss_cuda.so
tests/gpu/decode_ab.sh --log $O/decode-ab.txt main=$A/main/$E L=$EN main L L main main L L main
echo "ab ${SECONDS}s"
for v in main L; do
  EE=$EN; [ $v = main ] && EE=$A/main/$E
  echo "ncu $v: $(timeout 60 tests/gpu/ncu_durations.sh --csv /tmp/ncu-$v.csv 'gate_up_ring|moe_down' -- \
    $B/bench/decode --engine $EE --model $M20B --contexts 128 --tokens 16)"
done
echo "ncu ${SECONDS}s"
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
