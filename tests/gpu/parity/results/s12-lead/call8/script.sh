#!/bin/bash
# session 12 call 8 (one command line): parity without the expert cache and with the cuBLAS experts from 32 tokens
# (LLMR_GPTOSS_EXPERT_CACHE=0 LLMR_GPTOSS_MOE_MMA_PREFILL=0), then the engine self-test with the cuBLAS experts from 32
B=$PWD/.gpu-lead/build; export LLMR_GPTOSS_EXPERT_CACHE=0 LLMR_GPTOSS_MOE_MMA_PREFILL=0; timeout 300 tests/gpu/parity/run.sh --build $B --out $OUT/parity --presets "tiny small" --seeds 1 --lengths "300 2000" --no-unit > $OUT/parity.txt 2>&1
export LLMR_GPTOSS_EXPERT_CACHE=2; timeout 120 $B/tests/gpu/gptoss_parity > $OUT/selftest-nocache.txt 2>&1
