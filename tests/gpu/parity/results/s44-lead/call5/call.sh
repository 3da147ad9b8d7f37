#!/bin/bash
# Session 44, call 5 (the last ~630 s of device time): the standing on the engine as it lands (main + q/k/v's loads all
# before its first product; the staged down and LLMR_GPTOSS_ROUTE_RING=3 reverted), then the full gate on that build.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 60 $B/bench/decode --engine $EN --model $M20B --contexts 128,1024 --tokens 256 > $O/standing.txt 2>&1; echo "decode rc=$? ${SECONDS}s"
timeout 90 $B/bench/throughput --engine $EN --model $M20B --streams 1,8,32,64 >> $O/standing.txt 2>&1; echo "throughput rc=$? ${SECONDS}s"
grep -E "^ +(128|1024) |^ +(1|8|32|64) +[0-9]+ +[0-9]+ " $O/standing.txt
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
