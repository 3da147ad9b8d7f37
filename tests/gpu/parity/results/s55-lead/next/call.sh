#!/bin/bash
# Prepared in session 55 for the next session (no device time was left to run it): one call, ~9 minutes.
# Build here first: git apply tests/gpu/parity/results/s55-lead/next/pairs-ticket.diff; make -j8;
#   cp -a . /tmp/alt && (cd /tmp/alt && git checkout -q -- engines tests && make build/engines/gptoss_cuda/libgptoss_cuda.so
#   && rm -rf build/tests build/bench build/bin)   # the alt engine: main without the diff
#   rm -rf .gpu-lead/pkg && tests/gpu/pack.sh --build build --out .gpu-lead/pkg --alt main:/tmp/alt
# and run with carry [".gpu-lead/pkg"].
# 1. pairs-ticket.diff (also: its grid cached per device, as gptoss_sm_count; and two twins from session 55's review
#    made one piece each: mr_finish_row, the router finish of the ring's ROUTE 1 / 4 and of the pairs finishers, and
#    mi_mma_mags, mi_chunk's and mi_chunk_pair's magnitude mma; the same arithmetic, but the ring kernels' PTX changes
#    (register numbers, instruction order), so they wait for this gate): the routed pairs gate_up's finishers become the first n CTAs to start (an atomic ticket)
#    instead of CTAs 0..n-1, so its wait cannot block a finisher whatever order the GPU starts CTAs in (session 55
#    relied on the in-order dispatch of a grid beside other kernels). Its PTX spills 20 B in the prologue where main's
#    spills none: the checks (bit for bit, as before), then 2 / 4 / 6 streams against main (A B B A). Predicted level
#    (+-0.5%); land it if so, with the gate below.
# 2. The per-row experts to 7 or 8 rows again, now with the pairs gate_up (session 55 measured pr7 / pr8 only with
#    the rows launch, +0.1-0.7% / -8%): pr6 (the default) vs pr7 vs pr8 at 7-8 streams. Predicted pr7 +1-3% at 7-8
#    streams (~7 of 28 pairs share an expert at 7 rows).
# 3. The full gate with the settings of whichever of pr7 / pr8 has the larger step-rate sum if it beats pr6 (they
#    change the 7-8-row steps' path), else with the defaults; it also gates pairs-ticket.diff.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
MAIN=$B/../alt/main/engines/gptoss_cuda/libgptoss_cuda.so
timeout 150 $B/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1
echo "rows-checks rc=$? ${SECONDS}s"
grep -E "^FAIL|checks,|timing gate_up [0-9] rows \(" $O/rows-checks.txt | cut -c1-260
if grep -q "^FAIL" $O/rows-checks.txt || ! grep -q "checks, 0 failed" $O/rows-checks.txt; then
  echo "checks failed: stop"; exit 0
fi
timeout 100 tests/gpu/throughput_ab.sh --streams 2,4,6 --log $O/tp-ticket.txt ticket=$EN main=$MAIN \
  ticket main main ticket > $O/ab-ticket.txt 2>&1
echo "ticket A/B rc=$? ${SECONDS}s"; sed -n '/^mean step/,$p' $O/ab-ticket.txt
P7="LLMR_GPTOSS_BATCH_MOE_PER_ROW=7:LLMR_GPTOSS_MOE_MMA_MIN_ROWS=8"
P8="LLMR_GPTOSS_BATCH_MOE_PER_ROW=8:LLMR_GPTOSS_MOE_MMA_MIN_ROWS=9"
timeout 100 tests/gpu/throughput_ab.sh --streams 7,8 --log $O/tp-perrow.txt pr6=$EN pr7=$EN:$P7 pr8=$EN:$P8 \
  pr6 pr7 pr8 pr8 pr7 pr6 > $O/ab-perrow.txt 2>&1
echo "per-row A/B rc=$? ${SECONDS}s"; sed -n '/^mean step/,$p' $O/ab-perrow.txt
best=$(awk '/^mean step tok\/s/ {t=1; next} /^mean ms per step/ {t=0}
  t && /^pr[678] / { s=0; for (i=2;i<NF;i++) if ($i ~ /^[0-9.]+$/ && ($(i+1) == "/" || ($(i+2) == "/" && $(i+1) ~ /%$/))) s+=$i;
                     if (s > bs) { bs=s; b=$1 } } END { print b }' $O/ab-perrow.txt)
case "$best" in
  pr7) VARS=${P7//:/ } ;;
  pr8) VARS=${P8//:/ } ;;
  *) VARS="" ;;
esac
echo "gate with ${best:-the defaults}: $VARS"
env $VARS timeout $((585 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -6 | cut -c1-250
echo "total ${SECONDS}s"
