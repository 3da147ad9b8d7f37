#!/bin/bash
# session 13 call 4: the staged o_proj with the attention kernel at the largest shared-memory carveout
# (so the staged blocks can share its SMs); pair timing with L2 flushed; decode A/B of three settings.
B=$PWD/.gpu-lead/build; O=$OUT
nvidia-smi --query-gpu=name --format=csv,noheader
$B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$?"; tail -1 $O/kernels.txt; grep -E "^FAIL" $O/kernels.txt | head; grep -E "timing decode attention \+ o_proj" $O/kernels.txt | cut -c1-150
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== OPROJ_STAGED=0"; LLMR_GPTOSS_OPROJ_STAGED=0 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== staged, carveout"; $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== staged, ATTN_CARVEOUT=0"; LLMR_GPTOSS_ATTN_CARVEOUT=0 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
