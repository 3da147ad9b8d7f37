#!/bin/bash
# Session 52, call 4: the full gate on exactly the landing build (the review mends: linear.cu's row-instance picker and
# gemv1_fin_make, the ring's row offsets in one branch, one dbg_router call; and LLMR_GPTOSS_BATCH_HEAD_ROWS=2 as the
# default: a 2-row step's lm_head on gptoss_gemv1_rows). Then the standing step rates, and for the next session the
# 20b's expert forms at 8 and 64 rows (--moe-timing) with ncu's counters on the F16 / e5m2 streaming kernels at 64.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
timeout 470 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-250
timeout 40 $B/bench/throughput --engine $EN --model $M20B --streams 1,2,3,4,8,32,64 > $O/standing.txt 2>&1
echo "standing: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' $O/standing.txt | awk '{ printf "%s: %s / %s (%s); ", $1, $5, $8, $11 }') ${SECONDS}s"
left=$((585 - SECONDS))
[ $left -gt 20 ] && timeout $((left > 40 ? 40 : left - 5)) $B/tests/gpu/gptoss_kernels --moe-timing 8 64 > $O/moe-timing.txt 2>&1
grep "^time experts" $O/moe-timing.txt | cut -c1-400
left=$((585 - SECONDS))
[ $left -gt 30 ] && timeout $((left - 5)) ncu --clock-control none -k regex:mma_stream -c 8 --csv \
  --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
  $B/tests/gpu/gptoss_kernels --moe-timing 64 > $O/ncu-moe64.csv 2>&1
echo "ncu rc=$? lines $(wc -l < $O/ncu-moe64.csv 2>/dev/null)"
echo "total ${SECONDS}s"
