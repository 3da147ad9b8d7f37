#!/bin/bash
# Session 32 call 6 (H200): packed prefill of prompts of any length (LLMR_GPTOSS_PREFILL_PACK=2, the new default)
# against session 21's rule (=1: only prompts past the experts' crossover, 208 tokens with the expert cache):
# bench/throughput A B A B at 8 / 32 / 64 streams, then the full gate on the new default.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2; do for v in 2 1; do
  LLMR_GPTOSS_PREFILL_PACK=$v timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8,32,64 > $O/tp-pack$v-$r.txt 2>&1
  echo "pack=$v run $r rc=$? ${SECONDS}s: $(grep -E '^ +(8|32|64) +[0-9]+ +[0-9]+ ' $O/tp-pack$v-$r.txt | awk '{printf "%s %s (%s, p99 %s) ", $1, $5, $NF, $7}')"
  grep -E "^64 streams, wall" $O/tp-pack$v-$r.txt | cut -c1-110
done; done
timeout 430 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-250 | head -10
grep -hE "packed prefill" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-200 | head -3
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
echo "total ${SECONDS}s"
