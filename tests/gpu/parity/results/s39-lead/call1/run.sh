#!/bin/bash
# Session 39, call 1: session 38's prepared e5-mix (s38-lead/next/e5-mix-call.sh, alt "mix") and the kernel checks on
# main's HEAD (edd753d: the review's host-side helpers and test helper had run through host CI only).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; A=/tmp/B/alt/mix; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 &
MK=$!
timeout 250 $B/tests/gpu/gptoss_kernels --tc-checks > $O/tc-checks-head.txt 2>&1 &
TC=$!
timeout 200 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma-checks-head.txt 2>&1 &
MH=$!
timeout 200 $A/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma-checks-mix.txt 2>&1
echo "mix moe-mma-checks rc=$? $(tail -1 $O/mma-checks-mix.txt) ${SECONDS}s"; grep -E "FAIL|e5m2 copy" $O/mma-checks-mix.txt | head -8 | cut -c1-200
wait $MH; echo "HEAD moe-mma-checks rc=$? $(tail -1 $O/mma-checks-head.txt) ${SECONDS}s"; grep FAIL $O/mma-checks-head.txt | head -5 | cut -c1-200
wait $TC; echo "HEAD tc-checks rc=$? $(tail -1 $O/tc-checks-head.txt) ${SECONDS}s"; grep FAIL $O/tc-checks-head.txt | head -5 | cut -c1-200
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
timeout 60 $A/tests/gpu/gptoss_kernels --moe-timing 16 32 64 128 > $O/moe-timing.txt 2>&1
echo "moe-timing rc=$? ${SECONDS}s"
grep -o "time experts T=[0-9]*\|the same with the tiled weights[^;]*\|the e5m2 copy[^;]*" $O/moe-timing.txt
E=$A/engines/gptoss_cuda/libgptoss_cuda.so
for v in 0 8 8 0; do
  LLMR_GPTOSS_MOE_E5_MIX=$v timeout 70 $B/bench/throughput --engine $E --model /tmp/m20b --streams 32,64 > /tmp/tp.txt 2>&1
  echo "mix $v rc=$? ${SECONDS}s: $(grep -E '^ +(32|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')"
  { echo "== mix $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done
if [ $SECONDS -lt 380 ]; then
  LLMR_GPTOSS_MOE_E5_MIX=8 timeout $((560 - SECONDS)) $A/tests/gpu/gptoss_batching --engine $E --model /tmp/m20b > $O/batching-mix.txt 2>&1
  echo "batching 20b with mix 8 rc=$? $(tail -1 $O/batching-mix.txt) ${SECONDS}s"
fi
echo "total ${SECONDS}s"
