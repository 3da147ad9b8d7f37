#!/bin/bash
# Session 54, call 3: the per-row gate_up's CTAs rounded down among the rows (moe_decode_dp4a.cu mr_launch). Rounded up,
# a 5-row step asked for 80 x 5 = 400 persistent CTAs where 3 x 132 = 396 fit: the 4 left over would run their 18
# stages each after the first wave, alone. Same sums per stage (any CTA computes a stage alike): the same bits.
# Predicted: 5-row steps' gate_up ~10-18 µs a layer shorter, the 5-row steps -5-9%; 4 streams (99 x 4 = 396, unchanged)
# level. A/B against HEAD as the alt "old" at 4 and 5 streams; the full gate on exactly this build; the standing.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
OLD=$B/../alt/old/engines/gptoss_cuda/libgptoss_cuda.so
timeout 110 tests/gpu/throughput_ab.sh --streams 4,5 --log $O/tp-ctas.txt old=$OLD new=$EN old new new old old new \
  > $O/ab-ctas.txt 2>&1
echo "ctas A/B rc=$? ${SECONDS}s"; tail -12 $O/ab-ctas.txt
timeout 440 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -6 | cut -c1-250
left=$((588 - SECONDS))
[ $left -gt 40 ] && timeout $((left - 3)) $B/bench/throughput --engine $EN --model $M20B --streams 1,2,3,4,5,6,8,32,64 \
  > $O/standing.txt 2>&1
echo "standing rc=$? ${SECONDS}s: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' $O/standing.txt | awk '{ printf "%s: %s / %s (%s); ", $1, $5, $8, $11 }')"
echo "total ${SECONDS}s"
