#!/bin/bash
# Session 55 call 7: the landing build (LLMR_GPTOSS_MOE_PAIRS default 2, the pair tile's cost 10). The full gate on
# exactly it, then as long as time allows the A/B again: the default against LLMR_GPTOSS_MOE_PAIRS=0 at 2, 4, 5, 6
# streams.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 470 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -6 | cut -c1-250
left=$((575 - SECONDS))
[ $left -gt 40 ] || { echo "no time for the A/B"; exit 0; }
timeout $left tests/gpu/throughput_ab.sh --streams 2,4,5,6 --log $O/tp-pairs.txt pairs=$EN off=$EN:LLMR_GPTOSS_MOE_PAIRS=0 \
  pairs off off pairs > $O/ab-pairs.txt 2>&1
echo "A/B rc=$? ${SECONDS}s"; sed -n '/^mean step/,$p' $O/ab-pairs.txt
echo "total ${SECONDS}s"
