#!/bin/bash
# Session 51, call 3: why call 2's down pair kernel was slower (30.4 us a layer at 2 rows against the old 20.1), and a
# second order. Alt "pair" = main + call3/down-pair2.diff: LLMR_GPTOSS_DOWN_PAIR=1 is call 2's kernel (row 2p+1's
# copies issued right after row 2p's loads), 2 issues them only once row 2p's loads have landed (a false dependency),
# 0 the old launch (a block a row). Suspected: ptxas sinks row 2p's u = 1, 2 loads past the copies (moe_decode.cu's
# DN_MINB note saw that in the one-token kernel), so row 2p's data queued behind row 2p+1's.
# Predicted for 2: down at 2 rows ~17-18 us (20.1 for 0), 2 / 3 / 4 streams' step rate +2-3%.
# Then ncu (warp states, scheduler, memory, occupancy) on the 2-row step's down (0 and 2), qkv_rows<2> and the routed
# ring gate_up: where their time goes, for the next session.
. tests/gpu/unpack.sh .gpu-lead/pkg || exit 1
O=$OUT P=$B E=$EN # the package is the pair tree's build (no alt: 64 MiB)
timeout 120 $P/tests/gpu/gptoss_kernels --rows-checks > $O/rows-checks.txt 2>&1; rc=$?
echo "rows checks rc=$rc: $(tail -1 $O/rows-checks.txt) ${SECONDS}s"; grep -E "^FAIL|pair" $O/rows-checks.txt | cut -c1-200 | head -8
for round in 1 2; do
  for v in 0 2 1; do
    LLMR_GPTOSS_DOWN_PAIR=$v timeout 60 $B/bench/throughput --engine $E --model $M20B --streams 2,3,4,5 > /tmp/tp.txt 2>&1
    echo "pair $v: $(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{ printf "%s: %s / %s; ", $1, $5, $8 }')"
    { echo "== $v round $round"; cat /tmp/tp.txt; } >> $O/throughput.txt
  done
done | tee $O/ab.txt
echo "ab ${SECONDS}s (streams: out tok/s / step rate)"
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
LLMR_GPTOSS_DOWN_PAIR=2 timeout 120 ncu --clock-control none --cache-control none $S -k 'regex:moe_down_pair|qkv_rows|ring_kernel' \
  --launch-skip 1500 -c 6 $B/bench/throughput --engine $E --model $M20B --streams 2 > $O/ncu-pair2.txt 2>&1
echo "ncu pair2 rc=$? ${SECONDS}s"
LLMR_GPTOSS_DOWN_PAIR=0 timeout 100 ncu --clock-control none --cache-control none $S -k 'regex:moe_down_decode' \
  --launch-skip 500 -c 2 $B/bench/throughput --engine $E --model $M20B --streams 2 > $O/ncu-pair0.txt 2>&1
echo "ncu pair0 rc=$? ${SECONDS}s"
grep -E "^  [a-z_].*\(|Duration|Warp Cycles Per Issued|Issued Ipc|No Eligible|Achieved Occupancy|Registers Per|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit" $O/ncu-pair2.txt $O/ncu-pair0.txt | cut -c1-160 | head -90
echo "total ${SECONDS}s"
