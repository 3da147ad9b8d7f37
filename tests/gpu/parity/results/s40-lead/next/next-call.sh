#!/bin/bash
# Prepared in session 40 (not run: its device time was spent). Measurements only, no engine change, for picking the
# next engine step (docs/performance.md, "What is next (session 40)"):
# (a) a 64-stream step by kernel at real clocks: session 40 call 3's window (launches 30,000-35,000) fell in the run's
#     prefills, so skip 60,000 as session 22 did (its steps.py groups a window's kernels into steps);
# (b) the batch-1 expert kernels (the dp4a ring gate_up, the down kernel) under ncu with the source page: whether
#     they are bound by the integer ALU pipe as the MXFP4 tiles' launch at 8 rows is (session 40 call 3: PRMT + LOP3
#     36% of its instructions, math-pipe throttle);
# (c) the router kernel at 8 and 64 rows (ncu full): where its ~12 us a layer go.
# Preparation: build main; tests/gpu/pack.sh --out .gpu-lead/pkg; carry .gpu-lead/pkg.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
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
