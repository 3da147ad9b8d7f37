#!/bin/bash
# Prepared in session 38 (compile-checked, not run; the device time was spent): e5-mix.diff, the e5m2 copy's launches
# with the experts of up to LLMR_GPTOSS_MOE_E5_MIX pairs on the MXFP4 tiles (mxfp4_mma_stream_e5_kernel branches per
# CTA: an expert whose pairs fit one 8-pair tile reads its weights once either way, so its decode can run on the ALU
# pipe beside the loads of the experts that take two tiles or more from the copy at twice the bytes). The same bits
# (the e5m2 check in --moe-mma-checks runs mix 0, 3 and 8 against the tiled launches). The kernel: 64 registers, 4
# bytes of spill (outside the loops, by the look of it; the e5 kernel alone had none). Predicted: one 20b layer's
# experts at 64 rows 0.245 (the copy alone) -> 0.20-0.22 ms, at 32 rows ~0.215 (most experts then hold 8 pairs or
# fewer), at 128 ~0.37 (most hold more); the 64-stream step rate +2-4% over the copy alone. If it wins, also try
# LLMR_GPTOSS_MOE_E5_MIN_ROWS=16 with it (at 16 rows nearly every expert would take the MXFP4 path).
# Preparation: build main; cp -a the tree to /tmp/mix; git apply tests/gpu/parity/results/s38-lead/next/e5-mix.diff;
# make; tests/gpu/pack.sh --out .gpu-lead/pkg --alt mix:/tmp/mix; carry .gpu-lead/pkg.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; A=/tmp/B/alt/mix; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 &
timeout 200 $A/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma-checks.txt 2>&1
echo "moe-mma-checks rc=$? $(tail -1 $O/mma-checks.txt) ${SECONDS}s"; grep -E "FAIL|e5m2 copy" $O/mma-checks.txt | head -8 | cut -c1-200
timeout 60 $A/tests/gpu/gptoss_kernels --moe-timing 16 32 64 128 > $O/moe-timing.txt 2>&1
echo "moe-timing rc=$? ${SECONDS}s"
grep -o "time experts T=[0-9]*\|the same with the tiled weights[^;]*\|the e5m2 copy[^;]*" $O/moe-timing.txt
wait; E=$A/engines/gptoss_cuda/libgptoss_cuda.so
for v in 0 8 8 0; do
  LLMR_GPTOSS_MOE_E5_MIX=$v timeout 60 $B/bench/throughput --engine $E --model /tmp/m20b --streams 32,64 > /tmp/tp.txt 2>&1
  echo "mix $v rc=$? ${SECONDS}s: $(grep -E '^ +(32|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')"
  { echo "== mix $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done
LLMR_GPTOSS_MOE_E5_MIX=8 timeout 200 $A/tests/gpu/gptoss_batching --engine $E --model /tmp/m20b > $O/batching-mix.txt 2>&1
echo "batching 20b with mix 8 rc=$? $(tail -1 $O/batching-mix.txt) ${SECONDS}s"
echo "total ${SECONDS}s"
