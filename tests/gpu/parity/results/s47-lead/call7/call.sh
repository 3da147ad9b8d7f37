#!/bin/bash
# Session 47, call 7 (measurements only; main 4ee3f09): call 6's source counters of the landed gate_up show the
# consumers waiting more for their stages (7.1% of the samples at the ring wait, 2.1% before) and 4.9% at the barrier
# that frees their sums' buffer: the producer's epilogue, between its copies, is late, and one reason is its global load
# of the stage's pair. Alt "pf" = main + ../producer-prefetch.diff: the pair's activation index (and, as before, its
# biases) loaded when the stage is asked for, two stages ahead; the epilogue then has no global load and no division.
# The same bits. Predicted: gate_up 17.3 -> 16.8-17.1 us, the step -0.2-0.6%.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt E=engines/gptoss_cuda/libgptoss_cuda.so
tests/gpu/decode_ab.sh --log $O/decode-ab.txt main=$EN pf=$A/pf/$E main pf pf main main pf pf main
echo "ab ${SECONDS}s"
for v in main pf; do
  EE=$EN; [ $v = pf ] && EE=$A/pf/$E
  echo "ncu $v: $(timeout 60 tests/gpu/ncu_durations.sh --csv /tmp/ncu-$v.csv 'gate_up_ring' -- \
    $B/bench/decode --engine $EE --model $M20B --contexts 128 --tokens 16)"
done
echo "total ${SECONDS}s"
