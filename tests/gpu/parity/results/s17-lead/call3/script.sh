#!/bin/bash
# session 17 call 3: the T = 1 expert GEMVs on dp4a (issue 10 step 18): plain (LLMR_GPTOSS_MOE_DP4A=1) and gate_up through a TMA ring (=2): their kernel checks
# and back-to-back timings (--moe-decode-timing), bench/decode default vs dp4a 1 and 2 twice, then self-test, parity and the
# tiny batching check with the ring on.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 90 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels-moe.txt 2>&1; echo "kernels-moe rc=$? ${SECONDS}s"
grep -E "^FAIL|dp4a|int8|checks|timing" $O/kernels-moe.txt | cut -c1-200
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
{ for i in 1 2; do
  echo "=== default"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== dp4a"; LLMR_GPTOSS_MOE_DP4A=1 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
  echo "=== dp4a ring gate_up"; LLMR_GPTOSS_MOE_DP4A=2 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
echo "before gate ${SECONDS}s"
LLMR_GPTOSS_MOE_DP4A=2 timeout $((400 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --steps "selftest parity batching" 2>&1 | tee $O/gate.txt
cp /tmp/g/gate/parity.txt /tmp/g/gate/batching.txt $O/ 2>/dev/null
echo "total ${SECONDS}s"
