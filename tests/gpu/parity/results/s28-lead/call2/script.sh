#!/bin/bash
# session 28 call 2: step 58, o_proj's last block reads the 360 partial rows with one bulk copy into shared memory
# and adds them there (LLMR_GPTOSS_FIN_ROWS=1, on; 0 = from L2 as before), one thread's fence before the count, and
# the finish's top-4 of 32 by redux.sync + ballot. The T = 1 MoE checks 10 times (both modes bit for bit the finish
# kernel, 6 times each per run; the top-4 edge cases), the full gate, bench/decode A B A B A B (FIN_ROWS 0 / 1) and
# the no-graph profile of each.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
fails=0
for r in $(seq 1 10); do
  timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > /tmp/moe-$r.txt 2>&1 || fails=$((fails+1))
  grep -E "^FAIL" /tmp/moe-$r.txt | cut -c1-240
done
echo "moe-decode-timing: $fails of 10 runs failed ${SECONDS}s"; cp /tmp/moe-1.txt $O/
grep -E "timing o_proj|top-4 of 32" /tmp/moe-1.txt /tmp/moe-2.txt | cut -c1-240
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1
for r in 1 2 3; do for f in 0 1; do
  LLMR_GPTOSS_FIN_ROWS=$f timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 > $O/decode-f$f-r$r.txt 2>&1
  echo "decode FIN_ROWS=$f run $r rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ " $O/decode-f$f-r$r.txt
done; done
for f in 0 1; do
  LLMR_GPTOSS_PROFILE=1 LLMR_GPTOSS_FIN_ROWS=$f timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128 > /tmp/prof-$f.txt 2>&1
  echo "profile FIN_ROWS=$f rc=$?"; grep -E "o_proj|gate_up|total" /tmp/prof-$f.txt
done
cat /tmp/prof-0.txt /tmp/prof-1.txt > $O/profiles.txt
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
echo "total ${SECONDS}s"
