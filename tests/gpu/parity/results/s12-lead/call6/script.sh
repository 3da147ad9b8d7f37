#!/bin/bash
# session 12 call 6: prompts of 256-1,024 tokens: the padded layout (one strided-batched GEMM per projection over
# all experts, LLMR_GPTOSS_TC_BATCHED=1) against a GEMM per expert, both on two bf16 parts (the padded layout has
# no fp16 form yet); the default (fp16 experts) beside them
B=$PWD/.gpu-lead/build; O=$OUT
nvidia-smi --query-gpu=name --format=csv,noheader
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
L=256,384,512,768,1024,4096
run() { echo "=== $1"; shift; env "$@" LLMR_GPTOSS_PREFILL_PROFILE=1 $B/bench/prefill --model /tmp/m20b --lengths $L --reps 3 2>&1 | grep -E "profile T=512|^ +[0-9]+ +[0-9.]+ " | cut -c1-200 | tail -8; }
{ run "F16=0 per expert" LLMR_GPTOSS_TC_F16=0; run "F16=0 BATCHED=1 (padded, strided-batched)" LLMR_GPTOSS_TC_F16=0 LLMR_GPTOSS_TC_BATCHED=1; run "default (fp16, per expert)" A=1;
  run "F16=0 per expert again" LLMR_GPTOSS_TC_F16=0; run "F16=0 BATCHED=1 again" LLMR_GPTOSS_TC_F16=0 LLMR_GPTOSS_TC_BATCHED=1; } > $O/padded.txt 2>&1; cat $O/padded.txt
