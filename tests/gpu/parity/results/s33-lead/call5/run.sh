#!/bin/bash
# Session 33 call 5 (H200): the experts' tiled copy beside the checkpoint's layout (LLMR_GPTOSS_MOE_TILED=1: the
# batched kernels read the copy, the T = 1 kernels the checkpoint's layout) against the default (the copy in the
# experts' place, read by both), after call 4 found MOE_TILED=0 +1.9% at batch 1. bench/decode and bench/throughput,
# A B A B, with each load's VRAM.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2; do for v in 2 1; do
  LLMR_GPTOSS_MOE_TILED=$v timeout 40 $B/bench/decode --model /tmp/m20b --contexts 128,1024 --tokens 64 > /tmp/d.txt 2>&1
  echo "decode tiled=$v run $r rc=$?: $(grep -E '^ +(128|1024) ' /tmp/d.txt | awk '{printf "%s %s (%s) ", $1, $3, $NF}') $(grep -oE 'VRAM [0-9.]+ GB' /tmp/d.txt)"
  grep -E 'tiled' /tmp/d.txt | head -2 | cut -c1-150; { echo "== tiled=$v run $r"; cat /tmp/d.txt; } >> $O/decode-all.txt
done; done
for r in 1 2; do for v in 2 1; do
  LLMR_GPTOSS_MOE_TILED=$v timeout 40 $B/bench/throughput --model /tmp/m20b --streams 8,32,64 > /tmp/t.txt 2>&1
  echo "tp tiled=$v run $r rc=$?: $(grep -E '^ +(8|32|64) +[0-9]+ +[0-9]+ ' /tmp/t.txt | awk '{printf "%s %s (%s, p99 %s) ", $1, $5, $NF, $7}') $(grep -oE 'VRAM [0-9.]+ GB' /tmp/t.txt)"
  { echo "== tiled=$v run $r"; cat /tmp/t.txt; } >> $O/tp-all.txt
done; done
echo "total ${SECONDS}s"
