#!/bin/bash
# session 16 call 10 (branch s16-router-split): the T = 1 router's GEMV as partial sums in o_proj's blocks
# (LLMR_GPTOSS_ROUTER_SPLIT=1): its kernel check and back-to-back timing (--moe-decode-timing), bench/decode main vs
# the split twice, then the engine self-test, parity and batching (tiny) with the split on.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"
grep -E "^FAIL|router split|checks|o_proj \+ router" $O/kernels.txt | cut -c1-220
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
{ for i in 1 2; do
  echo "=== main"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== split"; LLMR_GPTOSS_ROUTER_SPLIT=1 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
echo "before gate ${SECONDS}s"
LLMR_GPTOSS_ROUTER_SPLIT=1 timeout $((175 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --steps "selftest parity batching" 2>&1 | tee $O/gate.txt
cp /tmp/g/gate/parity.txt /tmp/g/gate/batching.txt $O/ 2>/dev/null
echo "total ${SECONDS}s"
