#!/bin/bash
# Session 36 call 5 (H200): the fp16 experts' split (tc_split_f16_kernel) reading its row once, 16 bytes a thread, and
# writing half2 pairs (call 4's ncu: 4.2 ms of a 4,096-token prompt at ~1.1 TB/s). 1) bench/prefill, old (main before
# it) against new, A B A B, without the expert cache and with it; 2) side by side: gptoss_kernels --tc-checks (with a new
# case for the two-pass form), and the gate's self-test, parity and batching (tiny and 20b), with the cache and without.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for r in 1 2; do for v in old new; do for c in 0 2; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; [ $v = old ] && E=/tmp/B/alt/old/engines/gptoss_cuda/libgptoss_cuda.so
  L=256,1024,4096; [ $c = 2 ] && L=2048,4096
  LLMR_GPTOSS_EXPERT_CACHE=$c LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 60 $B/bench/prefill --engine $E --model /tmp/m20b --lengths $L --reps 3 > /tmp/pf.txt 2>&1
  echo "$v cache=$c $r rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s | ", $1, $2}') ${SECONDS}s"
  { echo "== $v cache $c $r"; cat /tmp/pf.txt; } >> $O/prefill.txt
done; done; done
timeout 300 $B/tests/gpu/gptoss_kernels --tc-checks > $O/tc.txt 2>&1 &
P1=$!
timeout 380 tests/gpu/gate.sh --build $B --out /tmp/g1 --full --steps "selftest parity batching" > $O/gate-cache.txt 2>&1 &
P2=$!
LLMR_GPTOSS_EXPERT_CACHE=0 timeout 380 tests/gpu/gate.sh --build $B --out /tmp/g2 --full --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
P3=$!
wait $P1; echo "tc-checks rc=$? $(tail -1 $O/tc.txt) ${SECONDS}s"; grep -E "FAIL" $O/tc.txt | head -5 | cut -c1-200
wait $P2; echo "gate (cache) rc=$? ${SECONDS}s"; grep -E "^GATE" $O/gate-cache.txt
wait $P3; echo "gate (no cache) rc=$? ${SECONDS}s"; grep -E "^GATE" $O/gate-nocache.txt
echo "total ${SECONDS}s"
