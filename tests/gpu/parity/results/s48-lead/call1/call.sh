#!/bin/bash
# Session 48, call 1: session 47's two prepared gate_up diffs, gated together. Alt "main" = a39ee09, "pf" = main +
# s47-lead/producer-prefetch.diff (call 7: -0.21% / -0.13%), the build "L" = pf + s47-lead/producer-fill-stage.diff
# (one mr_fill_stage helper for both producers' stage copies; its PTX is reordered, so it needs the gate). All the same
# bits. Predicted: L as pf, -0.1-0.3% a batch-1 step against main.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT A=/tmp/B/alt E=engines/gptoss_cuda/libgptoss_cuda.so
tests/gpu/decode_ab.sh --log $O/decode-ab.txt main=$A/main/$E pf=$A/pf/$E L=$EN main pf L L pf main main pf L L pf main
echo "ab ${SECONDS}s"
for v in main L; do
  EE=$EN; [ $v = main ] && EE=$A/main/$E
  echo "ncu $v: $(timeout 60 tests/gpu/ncu_durations.sh --csv /tmp/ncu-$v.csv 'gate_up_ring' -- \
    $B/bench/decode --engine $EE --model $M20B --contexts 128 --tokens 16)"
done
echo "ncu ${SECONDS}s"
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
