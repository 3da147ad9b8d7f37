#!/bin/bash
# session 12 call 5: the batched step's dense linears on tc_rows.cu's streaming kernel (LLMR_GPTOSS_TC_ROWS=1):
# kernel checks, throughput A/B with the per-part profile, batching checks with it on
B=$PWD/.gpu-lead/build; O=$OUT
nvidia-smi --query-gpu=name --format=csv,noheader
$B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$?"; tail -1 $O/kernels.txt; grep -E "^FAIL|rows kernel" $O/kernels.txt | cut -c1-150
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
tp() { echo "=== $1"; shift; env "$@" LLMR_GPTOSS_BATCH_PROFILE=1 $B/bench/throughput --model /tmp/m20b --streams 8,64 2>&1 | grep -E "^ *(8|64) +[0-9]+ +[0-9]+ |^ +(8-15|32-63|64) +[0-9]" | cut -c1-160; }
{ tp "TC_ROWS=0" LLMR_GPTOSS_TC_ROWS=0; tp "TC_ROWS=1" LLMR_GPTOSS_TC_ROWS=1; tp "TC_ROWS=0 again" LLMR_GPTOSS_TC_ROWS=0; tp "TC_ROWS=1 again" LLMR_GPTOSS_TC_ROWS=1; } > $O/tp.txt 2>&1; cat $O/tp.txt
LLMR_GPTOSS_TC_ROWS=1 $B/tests/gpu/gptoss_batching > $O/batching-tiny.txt 2>&1; echo "tiny rc=$?"; tail -1 $O/batching-tiny.txt
LLMR_GPTOSS_TC_ROWS=1 timeout 200 $B/tests/gpu/gptoss_batching --model /tmp/m20b > $O/b20.txt 2>&1; echo "b20 rc=$?"; grep -E "checks|^FAIL" $O/b20.txt | cut -c1-200
