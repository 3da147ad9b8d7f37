#!/bin/bash
# session 12 call 11: the review's refactors (attention_tc.cu atc_warp_rows / atc_acc_init, tc.cu add_bias4: PTX
# identical; test helpers): kernel checks and parity tiny + small on the final build
B=$PWD/.gpu-lead/build; O=$OUT
nvidia-smi --query-gpu=name --format=csv,noheader
$B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$?"; tail -1 $O/kernels.txt; grep -E "^FAIL" $O/kernels.txt | head
timeout 300 tests/gpu/parity/run.sh --build $B --out $O/parity --presets "tiny small" --seeds 1 --lengths "16 300 2000" --no-unit > $O/parity.txt 2>&1; echo "parity rc=$?"; grep -E "ALL PASS|^FAIL" $O/parity.txt | cut -c1-200; grep -E "^VERDICT" $O/parity.txt | cut -c1-150
