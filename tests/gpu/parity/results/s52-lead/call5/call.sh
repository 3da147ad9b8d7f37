#!/bin/bash
# Session 52, call 5: call 4's gate failed one kernel check, "sampling (one block) V=201088: temperature 1 with a
# frequency penalty = CPU twin": its fallback (draw_consistent) was handed the logits without the penalty. The test now
# gives it the penalized logits; the engine is call 4's, byte for byte (only tests/gpu/gptoss_kernels changed). The
# kernels step again; then ncu's counters on every streaming expert kernel of --moe-timing 64 (for the next session).
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT
md5sum $EN | tee $O/engine.md5
timeout 300 tests/gpu/gate.sh --build $B --out /tmp/g --steps kernels > $O/gate-kernels.txt 2>&1
echo "gate kernels rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-kernels.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -4 | cut -c1-250
grep -h "frequency penalty = CPU twin" /tmp/g/gate/*.txt | cut -c1-200
left=$((580 - SECONDS))
[ $left -gt 40 ] && timeout $((left - 10)) ncu --clock-control none -k regex:mma_stream -c 400 --csv \
  --metrics gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum \
  $B/tests/gpu/gptoss_kernels --moe-timing 64 > $O/ncu-moe64.csv 2>&1
echo "ncu rc=$? lines $(wc -l < $O/ncu-moe64.csv)"
xz -9 $O/ncu-moe64.csv
echo "total ${SECONDS}s"
