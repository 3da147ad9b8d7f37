#!/bin/bash
# session 13 call 5: batch-1 decode, the small reads of qkv, o_proj (gemv1), the router, gate_up, down and the attention
# issued at kernel start (bit-identical). Gate and bench/decode old (de2f5fa) vs new.
B=$PWD/.gpu-lead/build; O=$OUT; OLD=$PWD/.gpu-lead/old/libgptoss_cuda.so; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader
$B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$?"; tail -1 $O/kernels.txt; grep -E "^FAIL" $O/kernels.txt | head; grep -E "timing (router_decode|decode attention|MoE block fused \(3|qkv prologue|gemv1|gate_up_decode|down_decode)" $O/kernels.txt
timeout 180 $B/tests/gpu/gptoss_parity > $O/selftest.txt 2>&1; echo "selftest rc=$?"; tail -1 $O/selftest.txt; grep -E "^FAIL" $O/selftest.txt | cut -c1-170
timeout 300 tests/gpu/parity/run.sh --build $B --out $O/parity --presets "tiny small" --seeds 1 --lengths "16 300 2000" --no-unit > $O/parity.txt 2>&1; echo "parity rc=$?"; grep -E "ALL PASS|^FAIL" $O/parity.txt | cut -c1-200; grep -E "^VERDICT" $O/parity.txt | cut -c1-150
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== old (de2f5fa)"; $B/bench/decode --model /tmp/m20b --engine $OLD --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== new"; $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
LLMR_GPTOSS_PROFILE=1 $B/bench/decode --model /tmp/m20b --contexts 128 > $O/decode-prof.txt 2>&1; grep -E "us " $O/decode-prof.txt
$B/tests/gpu/gptoss_batching > $O/batching-tiny.txt 2>&1; echo "tiny rc=$?"; tail -1 $O/batching-tiny.txt
timeout 200 $B/tests/gpu/gptoss_batching --model /tmp/m20b > $O/b20.txt 2>&1; echo "b20 rc=$?"; grep -E "checks|^FAIL" $O/b20.txt | cut -c1-200 | sort | uniq -c
