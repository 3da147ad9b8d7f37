#!/bin/bash
# Prepared in session 40 (not run: its device time was spent). Measurements only, no engine change, for picking the
# next engine step (docs/performance.md, "What is next (session 40)"):
# (a) a 64-stream step by kernel at real clocks: session 40 call 3's window (launches 30,000-35,000) fell in the run's
#     prefills, so skip 60,000 as session 22 did (its steps.py groups a window's kernels into steps);
# (b) the batch-1 expert kernels (the dp4a ring gate_up, the down kernel) under ncu with the source page: whether
#     they are bound by the integer ALU pipe as the MXFP4 tiles' launch at 8 rows is (session 40 call 3: PRMT + LOP3
#     36% of its instructions, math-pipe throttle);
# (c) the router kernel at 8 and 64 rows (ncu full): where its ~12 us a layer go;
# (d) hybrid-copy.diff (alt "hyb", compile-checked and host-checked, never run on a GPU): the MXFP4 tiles' words in the
#     hybrid layout (mxfp4_lut.h) as a copy beside the tiles, read by the pre-staged F16 launches below the e5m2 copy's
#     32 rows when LLMR_GPTOSS_MOE_HYB=1: 8 ALU operations a word instead of 13, the same bits. Its --moe-mma-checks
#     (the same-bits check with tables on and off), --moe-timing 8 16 (the hybrid copy against the tiled weights, A B B
#     A), ncu of its launch at the 8-stream run, bench/throughput A/B at 8 and 32 streams with the copy off / on, and
#     the 20b batching check with it on. Predicted: the 8-row launches -10-20% (105 + 55 us a layer at 8 rows), 8
#     streams' step rate +5-8%.
# (d) runs first (~4 minutes); (a)-(c) take ~6 more: over 600 s in all, so the 'timeout 240 ncu' line may start a second
# call on the warm machine (the unpacked build and /tmp/m20b stay there).
# Preparation: build main; cp -a the tree to /tmp/hyb; git apply tests/gpu/parity/results/s40-lead/next/hybrid-copy.diff;
# make; tests/gpu/pack.sh --out .gpu-lead/pkg --alt hyb:/tmp/hyb; carry .gpu-lead/pkg.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
A=/tmp/B/alt/hyb; E=$A/engines/gptoss_cuda/libgptoss_cuda.so
timeout 200 $A/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma-checks-hyb.txt 2>&1
echo "hyb moe-mma-checks rc=$? $(tail -1 $O/mma-checks-hyb.txt) ${SECONDS}s"; grep -E "FAIL|hybrid copy" $O/mma-checks-hyb.txt | head -6 | cut -c1-200
timeout 60 $A/tests/gpu/gptoss_kernels --moe-timing 8 16 > $O/moe-timing-hyb.txt 2>&1
echo "hyb moe-timing rc=$? ${SECONDS}s"; grep -o "time experts T=[0-9]*\|the hybrid copy[^;]*" $O/moe-timing-hyb.txt
for v in 0 1 1 0; do
  LLMR_GPTOSS_MOE_HYB=$v LLMR_GPTOSS_BATCH_PROFILE=1 timeout 60 $B/bench/throughput --engine $E --model /tmp/m20b \
    --streams 8,32 > /tmp/tp.txt 2>&1
  echo "hyb $v rc=$? ${SECONDS}s: $(grep -E '^ +(8|32) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')"
  { echo "== hyb $v"; cat /tmp/tp.txt; } >> $O/throughput-hyb.txt
done
LLMR_GPTOSS_MOE_HYB=1 timeout 90 ncu --set full --import-source no -k "regex:mxfp4_mma_stream_kernel" --launch-skip 400 -c 2 \
  -o /tmp/rep-hyb8 $B/bench/throughput --engine $E --model /tmp/m20b --streams 8 > /tmp/ncu-hyb8.log 2>&1
echo "ncu hyb at 8 streams rc=$? ${SECONDS}s"
ncu -i /tmp/rep-hyb8.ncu-rep --print-details all 2>&1 | xz -9 > $O/ncu-hyb-8.txt.xz
ncu -i /tmp/rep-hyb8.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $O/source-hyb-8.csv.xz
xz -dc $O/ncu-hyb-8.txt.xz | grep -E "Duration|Issue Slots Busy|Executed Ipc Active|Stall Math|No Eligible" | cut -c1-120 | sort -u
LLMR_GPTOSS_MOE_HYB=1 timeout 200 $A/tests/gpu/gptoss_batching --engine $E --model /tmp/m20b > $O/batching-hyb.txt 2>&1
echo "batching 20b with the hybrid copy rc=$? $(tail -1 $O/batching-hyb.txt) ${SECONDS}s"
for v in 3 0 0 3; do # 2-3-row steps: each row on the batch-1 expert kernels (3, the default) or one fused T = 2..3 launch (0)
  LLMR_GPTOSS_BATCH_MOE_PER_ROW=$v LLMR_GPTOSS_BATCH_PROFILE=1 timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8 \
    > /tmp/tp.txt 2>&1
  echo "per-row $v rc=$? ${SECONDS}s: $(grep -E '^ +8 +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "step %s (%s) ", $8, $NF}')" \
    "$(awk '/^ +2-3 /{printf "2-3 rows %s ms (MoE %s)", $4, $10}' /tmp/tp.txt)"
done
timeout 240 ncu --clock-control none --cache-control none --launch-skip 60000 --launch-count 6000 --csv \
  --metrics gpu__time_duration.sum $B/bench/throughput --model /tmp/m20b --streams 64 > /tmp/dur.csv 2>&1
echo "ncu durations 64 rc=$? ${SECONDS}s"; grep -c gpu__time_duration /tmp/dur.csv; xz -T8 -c /tmp/dur.csv > $O/ncu-dur-64.csv.xz
for k in moe_gate_up_ring_kernel moe_down; do
  timeout 90 ncu --set full --import-source no -k "regex:$k" --launch-skip 200 -c 1 -o /tmp/rep-$k \
    $B/bench/decode --model /tmp/m20b --contexts 128 --tokens 64 > /tmp/ncu-$k.log 2>&1
  echo "ncu $k rc=$? ${SECONDS}s"
  ncu -i /tmp/rep-$k.ncu-rep --print-details all 2>&1 | xz -9 > $O/ncu-$k.txt.xz
  ncu -i /tmp/rep-$k.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $O/source-$k.csv.xz
  xz -dc $O/ncu-$k.txt.xz | grep -E "^  [a-z_]|Duration|DRAM Throughput|Issue Slots Busy|Executed Ipc Active|Stall Math|No Eligible" | cut -c1-120 | sort -u
done
for s in 8 64; do
  timeout 90 ncu --set full --import-source no -k "regex:moe_router_decode_kernel" --launch-skip 3000 -c 1 -o /tmp/rep-r$s \
    $B/bench/throughput --model /tmp/m20b --streams $s > /tmp/ncu-r$s.log 2>&1
  echo "ncu router at $s streams rc=$? ${SECONDS}s"
  ncu -i /tmp/rep-r$s.ncu-rep --print-details all 2>&1 | xz -9 > $O/ncu-router-$s.txt.xz
  xz -dc $O/ncu-router-$s.txt.xz | grep -E "^  [a-z_]|Duration|Grid Size|Issue Slots Busy|No Eligible" | cut -c1-120 | sort -u
done
echo "total ${SECONDS}s"
