#!/bin/bash
# session 12 call 10: the streaming MoE kernel's shape on the H100 (chosen on the H200): occupancy mode, token
# tiles and warps per CTA, at 32 and 64 streams, with the per-part profile
B=$PWD/.gpu-lead/build; O=$OUT
nvidia-smi --query-gpu=name --format=csv,noheader
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
tp() { echo "=== $1"; shift; env "$@" LLMR_GPTOSS_BATCH_PROFILE=1 $B/bench/throughput --model /tmp/m20b --streams 32,64 2>&1 | grep -E "^ *(32|64) +[0-9]+ +[0-9]+ |^ +(16-31|32-63|64) +[0-9]" | cut -c1-160; }
{ tp "default" A=1; tp "OCC=1" LLMR_GPTOSS_MOE_STREAM_OCC=1; tp "OCC=3" LLMR_GPTOSS_MOE_STREAM_OCC=3; tp "TILES=2" LLMR_GPTOSS_MOE_STREAM_TILES=2;
  tp "WARPS=8" LLMR_GPTOSS_MOE_STREAM_WARPS=8; tp "WARPS=12" LLMR_GPTOSS_MOE_STREAM_WARPS=12; tp "default again" A=1; } > $O/shape.txt 2>&1; cat $O/shape.txt
