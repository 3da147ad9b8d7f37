#!/bin/bash
# Session 48, call 7: the T = 1 gate_up ring's bulk copies with an L2 evict-first hint (ring_copy_stream), as the
# FFMA expert kernels' __ldcs loads have. Why: call 6's bound, the counter down without its split, took 11.59 us against
# the FFMA down's 12.02 yet made the step 0.3% slower: ~15 us a step lost outside the kernel, and its copies, like the
# gate_up ring's, left the weights in L2 as evict-normal lines, pushing out what the next kernels reuse. The build "L"
# = main + ring-copy-evict-first.diff (the same bits); alt "main" = 3b6e9d0; alt "r1ef" = call 3's counter down with
# the same hint (a data point: was its step penalty L2?). Predicted: L -0.3-1% a step, the gate_up's own time within
# +-0.2 us. The full gate on L if it gains >= 0.25% at 128 keys and does not lose at 1,024.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt E=engines/gptoss_cuda/libgptoss_cuda.so
timeout 200 tests/gpu/decode_ab.sh --log $O/decode-ab.txt main=$A/main/$E L=$EN r1ef=$A/r1ef/$E \
  main L r1ef L main main L r1ef L main | tee /tmp/ab.txt
echo "ab ${SECONDS}s"
for v in main L; do
  EE=$EN; [ $v = main ] && EE=$A/main/$E
  echo "ncu $v: $(timeout 60 tests/gpu/ncu_durations.sh --csv /tmp/ncu-$v.csv 'gate_up_ring|moe_down|qkv|gemv1' -- \
    $B/bench/decode --engine $EE --model $M20B --contexts 128 --tokens 16)"
done
echo "ncu ${SECONDS}s"
gain=$(awk '$1 == "L" && $3 ~ /^-/ { v = substr($3, 2); sub(/%/, "", v); if (v + 0 >= 0.25 && $5 ~ /^-/) print 1 }' /tmp/ab.txt)
if [ "$gain" = 1 ]; then
  timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
  echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
  grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
fi
echo "total ${SECONDS}s"
