#!/bin/bash
# Prepared in session 32 for the next session's first GPU call (not run). main's kernels are call 1's (its full gate
# passed on the H200); since then only host code changed: LLMR_GPTOSS_PREFILL_PACK=2 (opt-in; the default 1 is the
# rule call 1's gate ran) and the batching check's packed case, which now also runs mode 2 on the tiny model
# (compile-checked only). So: the full gate (its batching step runs that case), then bench/throughput with packing
# 1 and 2, A B A B. Build main into build/ and pack it (/tmp/pkg.sh-style: build/{bin,bench,engines,tests/gpu}).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 450 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL|packed prefill" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-250 | head -12
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2; do for v in 1 2; do
  LLMR_GPTOSS_PREFILL_PACK=$v timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8,32,64 > $O/tp-pack$v-$r.txt 2>&1
  echo "pack=$v run $r rc=$? ${SECONDS}s: $(grep -E '^ +(8|32|64) +[0-9]+ +[0-9]+ ' $O/tp-pack$v-$r.txt | awk '{printf "%s %s (%s) ", $1, $5, $NF}')"
done; done
echo "total ${SECONDS}s"
