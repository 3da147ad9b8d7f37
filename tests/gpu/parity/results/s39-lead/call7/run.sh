#!/bin/bash
# Session 39 call 7 (H200, the warm machine of call 6, its build and /tmp/m20b): the e5m2 launches' MXFP4 mix (0 / 8)
# with the lane-major copy, A B B A, bench/throughput at 32 and 64 streams.
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0; for v in 0 8 8 0; do LLMR_GPTOSS_MOE_E5_MIX=$v timeout 40 $B/bench/throughput --model /tmp/m20b --streams 32,64 > /tmp/tp.txt 2>&1; echo "mix $v rc=$? ${SECONDS}s: $(grep -E '^ +(32|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')"; { echo "== mix $v"; cat /tmp/tp.txt; } >> $OUT/throughput-mix.txt; done
