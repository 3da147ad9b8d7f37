#!/bin/bash
# session 12 call 2: the fp16 experts: kernel checks and self-test after the test changes, the prompt crossover
# (streaming kernel vs fp16 cuBLAS experts), batching tiny + 20b
B=$PWD/.gpu-lead/build; O=$OUT
nvidia-smi --query-gpu=name --format=csv,noheader
$B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$?"; tail -1 $O/kernels.txt; grep -E "^FAIL" $O/kernels.txt | head; grep -E "fp16" $O/kernels.txt | cut -c1-160
timeout 180 $B/tests/gpu/gptoss_parity > $O/selftest.txt 2>&1; echo "selftest rc=$?"; tail -1 $O/selftest.txt; grep -E "^FAIL|300-token|10\+10|reference engine" $O/selftest.txt | cut -c1-170
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
L=96,128,160,192,224,256,320
{ for i in 1 2; do
  echo "=== default (streaming kernel to 208)"; $B/bench/prefill --model /tmp/m20b --lengths $L --reps 5 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== MOE_MMA_PREFILL=0 (fp16 cuBLAS from 32)"; LLMR_GPTOSS_MOE_MMA_PREFILL=0 $B/bench/prefill --model /tmp/m20b --lengths $L --reps 5 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/crossover.txt 2>&1; cat $O/crossover.txt
$B/tests/gpu/gptoss_batching > $O/batching-tiny.txt 2>&1; echo "tiny rc=$?"; tail -1 $O/batching-tiny.txt
for i in 1 2; do echo "=== run $i" >> $O/b20.txt; timeout 200 $B/tests/gpu/gptoss_batching --model /tmp/m20b >> $O/b20.txt 2>&1; echo "b20 $i rc=$?"; done
grep -E "checks|^FAIL" $O/b20.txt | cut -c1-200 | sort | uniq -c
