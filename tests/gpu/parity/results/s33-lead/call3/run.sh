#!/bin/bash
# Session 33 call 3 (H200): larger packed prefills. bench/throughput with the defaults (slices of 1,024 tokens, packed
# groups of up to 1,023) against slices and groups of 2,048 / 2,047 and 1,536 / 1,535 (LLMR_GPTOSS_INTERLEAVE,
# LLMR_GPTOSS_PREFILL_PACK_TOKENS), A B C A B C; then the batch-1 profile (LLMR_GPTOSS_PROFILE=1) for the record.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for r in 1 2; do for v in 1024 2048 1536; do
  LLMR_GPTOSS_INTERLEAVE=$v LLMR_GPTOSS_PREFILL_PACK_TOKENS=$((v - 1)) timeout 40 $B/bench/throughput --model /tmp/m20b --streams 8,32,64 > /tmp/tp.txt 2>&1
  echo "slice=$v run $r rc=$? ${SECONDS}s: $(grep -E '^ +(8|32|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s (%s, p50 %s p99 %s) ", $1, $5, $NF, $6, $7}')"
  grep -E "^(32|64) streams, wall" /tmp/tp.txt | cut -c1-110; { echo "== slice=$v run $r"; cat /tmp/tp.txt; } >> $O/tp-all.txt
done; done
LLMR_GPTOSS_PROFILE=1 timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 --tokens 32 > $O/profile.txt 2>&1
echo "profile rc=$? ${SECONDS}s"; tail -30 $O/profile.txt | cut -c1-160
echo "total ${SECONDS}s"
