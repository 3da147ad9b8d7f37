#!/bin/bash
# session 12 call 1: the fp16 experts (LLMR_GPTOSS_TC_F16): kernel checks, self-test, prefill A/B, parity
B=$PWD/.gpu-lead/build; O=$OUT
nvidia-smi --query-gpu=name --format=csv,noheader
$B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$?"; tail -1 $O/kernels.txt; grep -E "^FAIL" $O/kernels.txt | head; grep -E "fp16" $O/kernels.txt | cut -c1-160
timeout 120 $B/tests/gpu/gptoss_parity > $O/selftest.txt 2>&1; echo "selftest rc=$?"; tail -1 $O/selftest.txt; grep -E "^FAIL|300-token|10\+10|reference engine" $O/selftest.txt | cut -c1-160
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
run() { echo "=== $1"; shift; env "$@" LLMR_GPTOSS_PREFILL_PROFILE=1 $B/bench/prefill --model /tmp/m20b --lengths 1024,4096 --reps 2 2>&1 | grep -E "profile T=4096|^ +(1024|4096) |rror" | tail -4; }
{ run "F16=1" LLMR_GPTOSS_TC_F16=1; run "F16=0" LLMR_GPTOSS_TC_F16=0; run "F16=1 again" LLMR_GPTOSS_TC_F16=1; } > $O/profile.txt 2>&1; cut -c1-230 $O/profile.txt
{ echo "=== default"; $B/bench/prefill --model /tmp/m20b --lengths 256,512,1024,4096; } > $O/prefill.txt 2>&1; grep -E "^===|^ +(256|512|1024|4096) " $O/prefill.txt
timeout 300 tests/gpu/parity/run.sh --build $B --out $O/parity --presets "tiny small" --seeds 1 --lengths "16 300 2000" --no-unit > $O/parity.txt 2>&1; echo "parity rc=$?"; grep -E "ALL PASS|^FAIL" $O/parity.txt | cut -c1-200; grep -E "^VERDICT" $O/parity.txt | cut -c1-140
