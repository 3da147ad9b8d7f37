#!/bin/bash
# Session 39 call 4 (H200, d07c5db): where the batched step's e5m2 expert launches lose time. ncu --set full of the
# first gate_up and down launches of mxfp4_mma_stream_e5_kernel at 64 and 32 rows (gptoss_kernels --moe-timing):
# duration, DRAM throughput, waves per SM, occupancy, stalls; the SASS source page with its stall samples as CSV. Then
# bench/throughput at 64 streams with 12- and 15-warp CTAs (LLMR_GPTOSS_MOE_STREAM_WARPS: 5,760 / 2,880 rows make
# 360 / 180 tiles of 16, so 16-warp CTAs leave the last row chunk of gate_up half idle and down's a quarter busy).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 &
MK=$!
for T in 64 32; do
  timeout 150 ncu --set full --import-source no -k "regex:mxfp4_mma_stream_e5_kernel" -c 2 -o /tmp/rep-e5-$T \
    $B/tests/gpu/gptoss_kernels --moe-timing $T > /tmp/ncu-e5-$T.log 2>&1
  echo "ncu e5 T=$T rc=$? ${SECONDS}s"
  ncu -i /tmp/rep-e5-$T.ncu-rep --print-details all > $O/ncu-e5-$T.txt 2>&1
  ncu -i /tmp/rep-e5-$T.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $O/source-e5-$T.csv.xz
  grep -E "Grid Size|Duration|DRAM Throughput|Waves Per SM|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued" \
    $O/ncu-e5-$T.txt | cut -c1-110
done
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
for w in 16 12 15 16 12 15; do
  LLMR_GPTOSS_MOE_STREAM_WARPS=$w timeout 60 $B/bench/throughput --model /tmp/m20b --streams 32,64 > /tmp/tp.txt 2>&1
  echo "warps $w rc=$? ${SECONDS}s: $(grep -E '^ +(32|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')"
  { echo "== warps $w"; cat /tmp/tp.txt; } >> $O/throughput.txt
done
echo "total ${SECONDS}s"
