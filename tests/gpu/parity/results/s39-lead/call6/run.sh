#!/bin/bash
# Session 39 call 6 (H200): the e5m2 copy lane-major (gptoss_mxfp4_e5_at): each warp load of one (row, half) is 512
# contiguous bytes, 4 L1 wavefronts where the slot order took 16 (call 4's ncu: the e5m2 launch's L1 data pipe 84% busy,
# its L1 hit rate 48%). The same bytes in the same registers, so the same bits (--moe-mma-checks, --tc-checks).
# Predicted: one 20b layer's experts at 64 rows 0.248 -> 0.20-0.22 ms; the 64-stream step rate +5-10% over d07c5db
# (alt "prev"). Then, on this build, the full gate and beside it the self-test, parity and batching without the cache.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; A=/tmp/B/alt/prev; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 &
MK=$!
timeout 250 $B/tests/gpu/gptoss_kernels --tc-checks > $O/tc-checks.txt 2>&1 &
TC=$!
timeout 200 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma-checks.txt 2>&1
echo "moe-mma-checks rc=$? $(tail -1 $O/mma-checks.txt) ${SECONDS}s"; grep -E "FAIL" $O/mma-checks.txt | head -5 | cut -c1-200
wait $TC; echo "tc-checks rc=$? $(tail -1 $O/tc-checks.txt) ${SECONDS}s"; grep FAIL $O/tc-checks.txt | head -5 | cut -c1-200
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
timeout 60 $B/tests/gpu/gptoss_kernels --moe-timing 16 32 64 128 > $O/moe-timing.txt 2>&1
echo "moe-timing rc=$? ${SECONDS}s"
grep -o "time experts T=[0-9]*\|the e5m2 copy[^;]*\|the prompt kernel[^;]*" $O/moe-timing.txt
for v in prev new new prev; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; [ $v = prev ] && E=$A/engines/gptoss_cuda/libgptoss_cuda.so
  timeout 60 $B/bench/throughput --engine $E --model /tmp/m20b --streams 32,64 > /tmp/tp.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(grep -E '^ +(32|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done
timeout 60 $B/bench/prefill --model /tmp/m20b --lengths 256,512,4096 --reps 3 > $O/prefill.txt 2>&1
echo "prefill rc=$?: $(grep -E '^ +[0-9]+ ' $O/prefill.txt | awk '{printf "%s %s | ", $1, $2}') ${SECONDS}s"
if grep -q " 0 failed" $O/mma-checks.txt && grep -q " 0 failed" $O/tc-checks.txt; then
  LLMR_GPTOSS_EXPERT_CACHE=0 timeout $((585 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
  G0=$!
  timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "selftest parity batching serving" > $O/gate.txt 2>&1
  echo "gate (kernels above) rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
  wait $G0; echo "gate without the cache rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-nocache.txt
  grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
fi
echo "total ${SECONDS}s"
