#!/bin/bash
# session 15 call 3 (main f6fdabd): diagnostics. ncu (full set, SASS-level stall samples) of the T = 1 MXFP4 gate_up
# and down kernels, and of qkv / o_proj / router in the decode graph; the 20b batching check twice (the seeded
# request 6 near-tie of call 2); bench/throughput with the streaming MoE kernel's shape forced.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
for k in gate_up down; do
  timeout 200 ncu --kernel-name-base demangled -k "regex:moe_${k}_decode_kernel<1, 2, true, 90>" --launch-skip 200 -c 1 --set full \
    --import-source yes -o /tmp/$k $B/bench/decode --model /tmp/m20b --contexts 128 > /tmp/ncu-$k.log 2>&1; echo "ncu $k rc=$?"
  ncu -i /tmp/$k.ncu-rep --page details > $O/$k-details.txt 2>&1
  ncu -i /tmp/$k.ncu-rep --page source --csv --print-source sass > /tmp/$k-sass.csv 2>&1; gzip -9c /tmp/$k-sass.csv > $O/$k-sass.csv.gz
  grep -E "Duration|DRAM Throughput|Executed Ipc A|Issue Slots Busy|Registers Per|Achieved Active|No Eligible|Warp Cycles Per Issued|SM Frequency|L1/TEX Hit|Mem Pipes|stall" $O/$k-details.txt | head -20
done
timeout 200 ncu --kernel-name-base demangled -k "regex:qkv_decode_kernel|gemv1_kernel|moe_router_decode_kernel|attention" --launch-skip 400 -c 4 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  $B/bench/decode --model /tmp/m20b --contexts 128 > $O/other-details.txt 2>&1; echo "ncu others rc=$?"
echo "ncu ${SECONDS}s"
for i in 1 2; do timeout 200 $B/tests/gpu/gptoss_batching --model /tmp/m20b > /tmp/b20-$i.txt 2>&1; echo "b20 run $i rc=$?"; grep -E "checks|^FAIL" /tmp/b20-$i.txt | cut -c1-160; done
cat /tmp/b20-1.txt /tmp/b20-2.txt > $O/b20.txt
{ echo "=== default"; LLMR_GPTOSS_BATCH_PROFILE=1 $B/bench/throughput --model /tmp/m20b --streams 8,64
  echo "=== OCC=3 TILES=2"; LLMR_GPTOSS_MOE_STREAM_OCC=3 LLMR_GPTOSS_MOE_STREAM_TILES=2 LLMR_GPTOSS_BATCH_PROFILE=1 $B/bench/throughput --model /tmp/m20b --streams 64
  echo "=== OCC=1 TILES=2"; LLMR_GPTOSS_MOE_STREAM_OCC=1 LLMR_GPTOSS_MOE_STREAM_TILES=2 LLMR_GPTOSS_BATCH_PROFILE=1 $B/bench/throughput --model /tmp/m20b --streams 64
  echo "=== MMA_MIN_ROWS=2"; LLMR_GPTOSS_MOE_MMA_MIN_ROWS=2 LLMR_GPTOSS_BATCH_PROFILE=1 $B/bench/throughput --model /tmp/m20b --streams 8
} > $O/tp.txt 2>&1; grep -E "^===|^ +(8|64) +[0-9]+ +[0-9]+ |^ +(64|32-63|2-3|4-7|8-15) +[0-9]+ " $O/tp.txt
echo "total ${SECONDS}s"
