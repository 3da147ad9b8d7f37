#!/bin/bash
# Session 54, call 2: the per-row experts up to 6 rows and the tensor-core ones from 7 (BATCH_MOE_PER_ROW 5 -> 6,
# MOE_MMA_MIN_ROWS 6 -> 7; call 1's A/B: 5-8 streams' step rate +1.0-1.4%). Another path for 6-row steps, so other
# bits: the full gate on exactly this build first. Then two thresholds not measured since session 19 / 40 with the
# 5-6-row steps: q/k/v's row kernel (BATCH_QKV_ROWS 4) and o_proj's (BATCH_O_ROWS 4) up to 6 rows, at 5 and 6 streams.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 450 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -6 | cut -c1-250
timeout $((585 - SECONDS)) tests/gpu/throughput_ab.sh --streams 5,6 --log $O/tp-rows.txt b=$EN \
  q6=$EN:LLMR_GPTOSS_BATCH_QKV_ROWS=6 o6=$EN:LLMR_GPTOSS_BATCH_O_ROWS=6 b q6 o6 o6 q6 b > $O/ab-rows.txt 2>&1
echo "rows A/B rc=$? ${SECONDS}s"; tail -14 $O/ab-rows.txt
echo "total ${SECONDS}s"
