#!/bin/bash
# session 15 call 8: work spread evenly over the SMs (issue 10 step 15): LLMR_GPTOSS_MOE_BALANCE=1 (gate_up's task
# ranges rotated per group), LLMR_GPTOSS_QKV_WARPS=10 (the prologue in 10-warp blocks, 2 per SM). Gate, then
# bench/decode old (a6542b7) vs main vs each vs both, twice; profile with both.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && xz -dc .gpu-lead/pkg/old.so.xz > /tmp/old.so && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; OLD=/tmp/old.so; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --steps "kernels selftest parity batching" 2>&1 | tee $O/gate.txt
for f in kernels parity; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
grep -E "^FAIL|rotated|10-warp" $O/kernels.txt | cut -c1-200; grep -E "timing (gate_up_decode|qkv prologue)" $O/kernels.txt | grep -v "T=8"
echo "gate ${SECONDS}s"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== old (a6542b7)"; $B/bench/decode --model /tmp/m20b --engine $OLD --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== main"; $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== balance"; LLMR_GPTOSS_MOE_BALANCE=1 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== qkv 10 warps"; LLMR_GPTOSS_QKV_WARPS=10 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== both"; LLMR_GPTOSS_MOE_BALANCE=1 LLMR_GPTOSS_QKV_WARPS=10 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
LLMR_GPTOSS_MOE_BALANCE=1 LLMR_GPTOSS_QKV_WARPS=10 LLMR_GPTOSS_PROFILE=1 $B/bench/decode --model /tmp/m20b --contexts 128 > $O/decode-prof.txt 2>&1; grep -E "us " $O/decode-prof.txt
LLMR_GPTOSS_MOE_BALANCE=1 LLMR_GPTOSS_QKV_WARPS=10 timeout 200 $B/tests/gpu/gptoss_batching --model /tmp/m20b > $O/b20.txt 2>&1; echo "b20 both rc=$?"; grep -E "checks|^FAIL" $O/b20.txt | cut -c1-200
echo "total ${SECONDS}s"
