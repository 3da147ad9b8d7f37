#!/bin/bash
# session 13 call 7: the final build (aadb515: the decode attentions' shared score / softmax-step helpers,
# PTX identical up to two initialisations): kernel checks, self-test, parity tiny + small, batch-1 decode
B=$PWD/.gpu-lead/build; O=$OUT
nvidia-smi --query-gpu=name --format=csv,noheader
$B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$?"; tail -1 $O/kernels.txt; grep -E "^FAIL" $O/kernels.txt | head; grep -E "timing decode attention pos=128" $O/kernels.txt
timeout 180 $B/tests/gpu/gptoss_parity > $O/selftest.txt 2>&1; echo "selftest rc=$?"; tail -1 $O/selftest.txt
timeout 300 tests/gpu/parity/run.sh --build $B --out $O/parity --presets "tiny small" --seeds 1 --lengths "16 300 2000" --no-unit > $O/parity.txt 2>&1; echo "parity rc=$?"; grep -E "ALL PASS|^FAIL" $O/parity.txt | cut -c1-200; grep -E "^VERDICT" $O/parity.txt | cut -c1-150
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
$B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ " | tee $O/decode.txt
