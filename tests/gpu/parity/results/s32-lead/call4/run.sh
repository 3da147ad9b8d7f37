#!/bin/bash
# Session 32 call 4 (H200, main as landed): the H200's figures for bench/load and bench/prefill, then the batched
# path's existing switches on this card (they were last tuned on the H100): bench/throughput at 32 and 64 streams,
# the defaults three times (first, middle, last) to show the noise.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
timeout 90 $B/bench/load --model /tmp/m20b --reps 3 > $O/load.txt 2>&1; echo "load rc=$? ${SECONDS}s"
grep -vE "^gptoss_cuda: (warm|expert cache)" $O/load.txt | tail -6 | cut -c1-200
timeout 90 $B/bench/prefill --model /tmp/m20b --lengths 128,512,1024,4096 > $O/prefill.txt 2>&1; echo "prefill rc=$? ${SECONDS}s"
grep -E "^ +[0-9]+ " $O/prefill.txt | cut -c1-200
run() { n=$1; shift; env "$@" timeout 60 $B/bench/throughput --model /tmp/m20b --streams 32,64 > $O/tp-$n.txt 2>&1
  echo "$n rc=$? ${SECONDS}s: $(grep -E '^ +(32|64) +[0-9]+ +[0-9]+ ' $O/tp-$n.txt | awk '{printf "%s %s (%s) ", $1, $5, $NF}')"; }
run base-a
run warps12 LLMR_GPTOSS_MOE_STREAM_WARPS=12
run warps8 LLMR_GPTOSS_MOE_STREAM_WARPS=8
run occ3 LLMR_GPTOSS_MOE_STREAM_OCC=3
run occ1 LLMR_GPTOSS_MOE_STREAM_OCC=1
run tables0 LLMR_GPTOSS_MOE_F16_TABLES=0
run tiled0 LLMR_GPTOSS_MOE_TILED=0
run base-b
run prefill128 LLMR_GPTOSS_MOE_MMA_PREFILL=128
run prefill384 LLMR_GPTOSS_MOE_MMA_PREFILL=384
run prefill640 LLMR_GPTOSS_MOE_MMA_PREFILL=640
run il512 LLMR_GPTOSS_INTERLEAVE=512
run il2048 LLMR_GPTOSS_INTERLEAVE=2048
run pack0 LLMR_GPTOSS_PREFILL_PACK=0
run tcstreams2 LLMR_GPTOSS_TC_STREAMS=2
run tcstreams8 LLMR_GPTOSS_TC_STREAMS=8
run minrows3 LLMR_GPTOSS_MOE_MMA_MIN_ROWS=3
run tcmin16 LLMR_GPTOSS_BATCH_TC_MIN=16
run base-c
echo "total ${SECONDS}s"
