#!/bin/bash
# session 12 call 7: the fp16 experts without the expert cache (each layer's used experts dequantized to fp16
# into scratch): parity tiny + small, and the 20b prefill with / without fp16 there
B=$PWD/.gpu-lead/build; O=$OUT
nvidia-smi --query-gpu=name --format=csv,noheader
export LLMR_GPTOSS_EXPERT_CACHE=0
timeout 300 tests/gpu/parity/run.sh --build $B --out $O/parity --presets "tiny small" --seeds 1 --lengths "300 2000" --no-unit > $O/parity.txt 2>&1; echo "parity rc=$?"; grep -E "ALL PASS|^FAIL" $O/parity.txt | cut -c1-200; grep -E "^VERDICT" $O/parity.txt | cut -c1-150
grep -h "expert cache" $O/parity/*.log 2>/dev/null | head -2
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
run() { echo "=== $1"; shift; env "$@" $B/bench/prefill --model /tmp/m20b --lengths 512,1024,4096 --reps 3 2>&1 | grep -E "expert cache|^ +[0-9]+ +[0-9.]+ " | cut -c1-200; }
{ run "no cache, fp16" A=1; run "no cache, two bf16 parts" LLMR_GPTOSS_TC_F16=0; } > $O/nocache.txt 2>&1; cat $O/nocache.txt
