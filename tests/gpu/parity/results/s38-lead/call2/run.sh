#!/bin/bash
# Session 38 call 2: the pre-staged expert launches with 16-pair tiles (LLMR_GPTOSS_MOE_PRE_TILES=2: 12-warp CTAs,
# 80 registers; 3: 16-warp CTAs, 64 registers with small spills) against today's 8-pair tiles (1). An expert with 9-16
# pairs then decodes its weights once instead of twice (the 64-row step's experts are ALU-bound on the decode, session
# 37). Predicted: one 20b layer's experts at T = 64 0.272 -> ~0.20-0.22 ms, T = 128 0.45 -> ~0.32; T = 16 unchanged;
# 64 streams +5-8%. Checks: --moe-mma-checks (the same bits, new forms), the 20b batching check with the new tiles.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 &
MK=$!
timeout 200 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma-checks.txt 2>&1
echo "moe-mma-checks rc=$? $(tail -1 $O/mma-checks.txt) ${SECONDS}s"; grep -E "FAIL|16-pair" $O/mma-checks.txt | head -12 | cut -c1-200
timeout 120 $B/tests/gpu/gptoss_kernels --moe-timing 16 32 64 128 > $O/moe-timing.txt 2>&1
echo "moe-timing rc=$? ${SECONDS}s"; grep -o "time experts T=[0-9]*\|the same with the tiled weights[^;]*\|pre-staged tiled 8-pair[^;]*" $O/moe-timing.txt
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
for v in 1 2 3 3 2 1; do
  LLMR_GPTOSS_MOE_PRE_TILES=$v timeout 90 $B/bench/throughput --model /tmp/m20b --streams 8,32,64 > /tmp/tp.txt 2>&1
  echo "tiles $v rc=$? ${SECONDS}s: $(grep -E '^ +(8|32|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s (%s) ", $1, $5, $NF}')"
  grep -E "^64 streams, wall" /tmp/tp.txt | cut -c1-150; { echo "== tiles $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done
LLMR_GPTOSS_MOE_PRE_TILES=2 timeout 200 $B/tests/gpu/gptoss_batching --model /tmp/m20b > $O/batching-t2.txt 2>&1
echo "batching 20b with 16-pair tiles rc=$? $(tail -1 $O/batching-t2.txt) ${SECONDS}s"
echo "total ${SECONDS}s"
