#!/bin/bash
# session 17 call 7: the ring gate_up with 2 stages x 3 CTAs per SM (LLMR_GPTOSS_MOE_DP4A=3: 24 consumer warps per SM
# instead of 16) beside 4 stages x 2 CTAs (=2): checks, back-to-back timings, bench/decode default vs 2 vs 3, twice.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 90 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels-moe.txt 2>&1; echo "kernels-moe rc=$? ${SECONDS}s"
grep -E "^FAIL|contribution|checks|timing (gate_up|down)|MoE block" $O/kernels-moe.txt | cut -c1-200
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
{ for i in 1 2; do
  echo "=== default"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== dp4a ring gate_up 4x2"; LLMR_GPTOSS_MOE_DP4A=2 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
  echo "=== dp4a ring gate_up 2x3"; LLMR_GPTOSS_MOE_DP4A=3 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
echo "total ${SECONDS}s"
