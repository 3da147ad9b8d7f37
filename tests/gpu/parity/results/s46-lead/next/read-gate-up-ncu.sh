#!/bin/bash
# Prepared in session 46 for the next call (needs only ncu: no package, no model; ~20 s): prints the two ncu --set full
# reports of call 5 as text, the tiled T = 1 gate_up (LLMR_GPTOSS_MOE_TILED=2, the default: moe_gate_up_ring_kernel
# <2, 1, 1>) and the checkpoint layout's (=1: <2, 1, 0>), 17.93 against 17.05 µs by ncu at real clocks (call 4).
# Their SASS is near the same (1,536 against 1,512 instructions, the same IMMA / PRMT / LDS counts), and by its
# offsets the tiled stage's shared loads are conflict-free where the checkpoint's have 2-way conflicts (a row is 1,440
# B, 8 banks apart every row), so look first at the copies (the ring's waits: full-barrier stalls, DRAM and L2
# throughput, L2 sectors per request) and at the launch's duration against its cycles.
# Run from the repository root as a call: tests/gpu/parity/results/s46-lead/next/read-gate-up-ncu.sh
R=tests/gpu/parity/results/s46-lead/call5
O=${OUT:-/tmp/out}; mkdir -p "$O"
for T in 1 2; do
  xz -dc $R/gate-up-tiled$T.ncu-rep.xz > /tmp/gu$T.ncu-rep || exit 1
  ncu --import /tmp/gu$T.ncu-rep --page details --print-units base > $O/gate-up-tiled$T-details.txt 2>&1
  ncu --import /tmp/gu$T.ncu-rep --page raw --csv > $O/gate-up-tiled$T-raw.csv 2>&1
  xz -9 $O/gate-up-tiled$T-raw.csv
  echo "mode $T: $(grep -cE '^ +[A-Za-z]' $O/gate-up-tiled$T-details.txt) detail lines"
done
# the sections side by side, first launch of each
paste -d'|' <(awk '/^ +[A-Z]/' $O/gate-up-tiled2-details.txt | head -150 | cut -c1-95) \
            <(awk '/^ +[A-Z]/' $O/gate-up-tiled1-details.txt | head -150 | awk '{print $NF}') > $O/side-by-side.txt
grep -iE "duration|dram throughput|l2 hit|memory throughput|bank|stall|warp cycles per issued|issued warp|elapsed cycles|sectors" \
  $O/side-by-side.txt | head -60
