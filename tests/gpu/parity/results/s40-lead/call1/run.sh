#!/bin/bash
# Prepared in session 39 (compile-checked, not run: the device time was spent). Two things in one call:
# (a) main's HEAD as landed: d40c0fb's ms_ring (the e5m2 launch's rings as one helper: its PTX instruction for
#     instruction the same, register names aside, but its SASS not byte-identical) and 44ceac2's LLMR_GPTOSS_MOE_E5_MIX=0
#     default (the same bits as mix 8, gated in call 6) have not run on a GPU: --moe-mma-checks and the standing.
# (b) e5-rt2.diff (alt "rt2"): mxfp4_mma_stream_e5_rt_kernel<1, 2>, two m16 tiles a warp, so each B fragment read from
#     shared memory serves both tiles' products (call 4's ncu: the B fragments' shared loads were 43% of the L1 data
#     pipe the e5m2 launch waits on); one super-chunk in flight a lane (the same registers for the weights as two);
#     64 registers with 16 bytes of spill. LLMR_GPTOSS_MOE_E5_RT=2 (default 1 in the diff); =3 the same kernel with
#     12-warp CTAs at 80 registers (77, no spill; 24 warps an SM instead of 32). The same bits (the e5m2 check runs
#     both). Predicted: one 20b layer's experts at 64 rows 0.232 -> 0.21-0.22 ms (by count the lane-major copy
#     cut the launch's L1 wavefronts by ~45%, not profiled, for 6.5% of its time, so another limit is near), 32 rows 0.207 -> ~0.20; the
#     64-stream step rate +3-5%. With 16-warp CTAs gate_up's 360 tiles of 16 rows make 11.25 row chunks of 32 tiles;
#     15 warps make 12 (and down's 180, 6): LLMR_GPTOSS_MOE_STREAM_WARPS=15 is tried beside it.
# (c) the same diff's L2 look-ahead (LLMR_GPTOSS_MOE_E5_AHEAD=N, default 0): lane 0 of each warp prefetches its tile's
#     super-chunk c + N into L2 when it loads c (cp.async.bulk.prefetch.L2, 2 KB), in both e5m2 launches. Why: call 4's
#     ncu source page (s39-lead/call4/source-e5-64.csv.xz) put 40% of the launch's stall samples on long scoreboard at
#     the decode's LOP3s (the first use of the loaded weights: HBM latency not covered by the 2-deep ring) and 20% short
#     scoreboard at the HMMAs (the B fragments' shared loads); DRAM 56%. Predicted: rt 1 with ahead 4 0.232 -> ~0.21 ms
#     at 64 rows; with rt 2 the two together ~0.19-0.20. The same bits (the check runs ahead 4).
# Preparation: build main; cp -a the tree to /tmp/rt2; git apply tests/gpu/parity/results/s39-lead/next/e5-rt2.diff;
# make; tests/gpu/pack.sh --out .gpu-lead/pkg --alt rt2:/tmp/rt2; carry .gpu-lead/pkg.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; A=/tmp/B/alt/rt2; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 &
MK=$!
timeout 200 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma-checks-head.txt 2>&1
echo "HEAD moe-mma-checks rc=$? $(tail -1 $O/mma-checks-head.txt) ${SECONDS}s"
timeout 200 $A/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma-checks-rt2.txt 2>&1
echo "rt2 moe-mma-checks rc=$? $(tail -1 $O/mma-checks-rt2.txt) ${SECONDS}s"; grep -E "FAIL|e5m2 copy" $O/mma-checks-rt2.txt | head -4 | cut -c1-200
timeout 60 $A/tests/gpu/gptoss_kernels --moe-timing 16 32 64 128 > $O/moe-timing.txt 2>&1
echo "moe-timing rc=$? ${SECONDS}s"
grep -o "time experts T=[0-9]*\|the e5m2 copy[^;]*" $O/moe-timing.txt
for k in mxfp4_mma_stream_e5_kernel mxfp4_mma_stream_e5_rt_kernel; do # the L1 pipe after the lane-major copy, and with rt 2 (the timing's forced settings pick which launches run)
  LLMR_GPTOSS_MOE_E5_RT=2 timeout 100 ncu --set full -k "regex:$k" -c 2 -o /tmp/rep-$k $A/tests/gpu/gptoss_kernels \
    --moe-timing 64 > /tmp/ncu-$k.log 2>&1
  echo "ncu $k rc=$? ${SECONDS}s"; ncu -i /tmp/rep-$k.ncu-rep --print-details all > $O/ncu-$k-64.txt 2>&1
  grep -E "Duration|DRAM Throughput|L1: Data Pipe Lsu Wavefronts|Achieved Occupancy" $O/ncu-$k-64.txt | cut -c1-110
done
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
timeout 40 $B/bench/decode --model /tmp/m20b --contexts 128,1024 --tokens 64 > $O/decode.txt 2>&1
echo "HEAD decode rc=$?: $(grep -E '^ +(128|1024) ' $O/decode.txt | awk '{printf "%s %s (%s) | ", $1, $3, $NF}')"
timeout 60 $B/bench/throughput --model /tmp/m20b --streams 1,8,32,64 > $O/throughput-head.txt 2>&1
echo "HEAD throughput rc=$?: $(grep -E '^ +(1|8|32|64) +[0-9]+ +[0-9]+ ' $O/throughput-head.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')"
E=$A/engines/gptoss_cuda/libgptoss_cuda.so
for v in "1 0 0" "1 0 4" "2 15 0" "2 15 4" "3 0 4" "3 0 4" "2 15 4" "2 15 0" "1 0 4" "1 0 0"; do set -- $v
  LLMR_GPTOSS_MOE_E5_RT=$1 LLMR_GPTOSS_MOE_STREAM_WARPS=$2 LLMR_GPTOSS_MOE_E5_AHEAD=$3 timeout 60 $B/bench/throughput \
    --engine $E --model /tmp/m20b --streams 32,64 > /tmp/tp.txt 2>&1
  echo "rt $1 warps $2 ahead $3 rc=$? ${SECONDS}s: $(grep -E '^ +(32|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')"
  { echo "== rt $1 warps $2 ahead $3"; cat /tmp/tp.txt; } >> $O/throughput.txt
done
LLMR_GPTOSS_MOE_E5_RT=2 LLMR_GPTOSS_MOE_E5_AHEAD=4 timeout $((580 - SECONDS)) $A/tests/gpu/gptoss_batching --engine $E \
  --model /tmp/m20b > $O/batching-rt2.txt 2>&1
echo "batching 20b with rt 2, ahead 4 rc=$? $(tail -1 $O/batching-rt2.txt) ${SECONDS}s"
echo "total ${SECONDS}s"
