#!/bin/bash
# Session 33 call 2 (H200): the full gate on LLMR_GPTOSS_PREFILL_PACK=3 as the default (short prompts packed with
# short ones on precise rows, long with long), then bench/throughput default against =1, A B A B, and the batch-1
# profile (LLMR_GPTOSS_PROFILE=1: each decode launch timed, no graph) for the record.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 & MK=$!
timeout 440 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-250 | head -10
grep -hE "packed prefill" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-200 | head -3
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
for r in 1 2; do for v in 3 1; do
  LLMR_GPTOSS_PREFILL_PACK=$v timeout 40 $B/bench/throughput --model /tmp/m20b --streams 8,32,64 > /tmp/tp.txt 2>&1
  echo "pack=$v run $r rc=$? ${SECONDS}s: $(grep -E '^ +(8|32|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s (%s, p99 %s) ", $1, $5, $NF, $7}')"
  grep -E "^64 streams, wall" /tmp/tp.txt | cut -c1-110; { echo "== pack=$v run $r"; cat /tmp/tp.txt; } >> $O/tp-all.txt
  [ $SECONDS -gt 560 ] && break 2
done; done
echo "total ${SECONDS}s"
