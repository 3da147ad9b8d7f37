#!/bin/bash
# session 25 call 7: the build with the route in the router on by default (LLMR_GPTOSS_BATCH_FUSE=5) and the two
# review mends (tc.cu part_rows, the router's staged write): the full gate, then 64 streams A B A B (fuse 4 / 5)
# and bench/decode.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "step schedule|^FAIL" /tmp/g/gate/batching*.txt 2>/dev/null | cut -c1-300
tar -C /tmp/g -czf $O/gate-logs.tgz gate
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1
for f in 4 5 4 5; do
  [ $SECONDS -gt 540 ] && break
  LLMR_GPTOSS_BATCH_FUSE=$f timeout 60 $B/bench/throughput --model /tmp/m20b --streams 64 > /tmp/t.txt 2>&1; rc=$?
  { echo "=== fuse $f rc=$rc"; cat /tmp/t.txt; } >> $O/tp.txt
  echo "fuse=$f rc=$rc ${SECONDS}s"; grep -E '^ +64 +[0-9]+ ' /tmp/t.txt
done
echo "total ${SECONDS}s"
