#!/bin/bash
# session 16 call 1: the tensor-core T = 1 expert GEMVs (LLMR_GPTOSS_MOE_TC=1, moe_decode_tc.cu): kernel checks
# (the new ones vs the CPU, back-to-back timings), bench/decode default vs MOE_TC=1 twice, then the self-test
# and parity with MOE_TC=1.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$?"; tail -1 $O/kernels.txt; grep -E "^FAIL" $O/kernels.txt | head
grep -E "tensor-core" $O/kernels.txt | cut -c1-200
grep -E "timing (gate_up_decode|down_decode|MoE block)" $O/kernels.txt | grep "T=1"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== main"; $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== TC"; LLMR_GPTOSS_MOE_TC=1 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
LLMR_GPTOSS_MOE_TC=1 LLMR_GPTOSS_PROFILE=1 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128 > $O/prof-tc.txt 2>&1
grep -A12 "profile:" $O/prof-tc.txt | head -16
echo "before gate ${SECONDS}s"
LLMR_GPTOSS_MOE_TC=1 timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --steps "selftest parity" 2>&1 | tee $O/gate.txt
cp /tmp/g/gate/parity.txt $O/ 2>/dev/null
echo "total ${SECONDS}s"
