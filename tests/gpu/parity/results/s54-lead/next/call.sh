#!/bin/bash
# Prepared in session 54 for the next session (no device time was left to run it): one call, ~9 minutes, on main as
# it is (no diff). Build: make; tests/gpu/pack.sh --build build --out .gpu-lead/pkg; run with carry [".gpu-lead/pkg"].
# Session 54 found the per-row gate_up's rows launches over-asking at 5, 7 and 8 rows (ceil(396 / rows) CTAs a row:
# 400, 399, 400 where 396 fit) and fixed it (19b78b1: 5 streams +8.7%). Call 1 of session 54 had measured the per-row
# experts up to 7 rows with the 7-row launch still over-asking (its 7-row steps +3.6%), so 7 and 8 get measured again:
# throughput_ab at 7-9 streams (pr6 the default; pr7 and pr8 by their variables), then the full gate run with the
# settings of whichever of pr7 / pr8 has the larger step-rate sum (they change the 7-8-row steps' bits). If that one
# also beats pr6 by more than the spread (its 4-7 / 8-15-row steps shorter), land it as the defaults (model.cu's
# BATCH_MOE_PER_ROW / MOE_MMA_MIN_ROWS, the engine doc) with this call's gate as its evidence: the same code, the
# defaults only. Predicted: the 7-row steps per row ~1-3% shorter than on the tensor-core experts (the per-row path's
# cost grows ~0.6 ms a row, the tensor-core one's less), so pr7 +0.5-1.5% at 7-8 streams; pr8 level or worse.
# Also first (~15 s): --moe-timing's new per-launch lines (session 54, not yet run): the batched steps' gate_up and down
# launches timed apart, with the CTAs each asks for and how many waves of 2 an SM that is. Session 54's sums put down at
# 64 rows at ~2.05 waves (540 CTAs on 264 slots): if the launches run wave by wave, down's third wave of ~12 CTAs is a
# tail, and down's rate should then sit well below gate_up's (~3.9 waves); if the two rates are close, no tail to chase.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 40 $B/tests/gpu/gptoss_kernels --moe-timing 32 64 > $O/moe-timing.txt 2>&1
echo "moe-timing rc=$? ${SECONDS}s"
grep "^time experts" $O/moe-timing.txt | sed 's/; /\n   /g' | grep -E "^time|by launch"
P7="LLMR_GPTOSS_BATCH_MOE_PER_ROW=7:LLMR_GPTOSS_MOE_MMA_MIN_ROWS=8"
P8="LLMR_GPTOSS_BATCH_MOE_PER_ROW=8:LLMR_GPTOSS_MOE_MMA_MIN_ROWS=9"
timeout 130 tests/gpu/throughput_ab.sh --streams 7,8,9 --log $O/tp-perrow.txt pr6=$EN pr7=$EN:$P7 pr8=$EN:$P8 \
  pr6 pr7 pr8 pr8 pr7 pr6 > $O/ab-perrow.txt 2>&1
echo "per-row A/B rc=$? ${SECONDS}s"; tail -30 $O/ab-perrow.txt
best=$(awk '/^mean step tok\/s/ {t=1; next} /^mean ms per step/ {t=0}
  t && /^pr[78] / { s=0; for (i=2;i<NF;i++) if ($i ~ /^[0-9.]+$/ && ($(i+1) == "/" || ($(i+2) == "/" && $(i+1) ~ /%$/))) s+=$i;
                    if (s > bs) { bs=s; b=$1 } } END { print b }' $O/ab-perrow.txt)
case "$best" in
  pr7) VARS=${P7//:/ } ;;
  pr8) VARS=${P8//:/ } ;;
  *) echo "no winner parsed from ab-perrow.txt; the gate is skipped"; exit 0 ;;
esac
echo "gate with $best: $VARS"
env $VARS timeout $((585 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -6 | cut -c1-250
echo "total ${SECONDS}s"
