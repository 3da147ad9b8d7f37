#!/bin/bash
# session 17 call 9: the T = 1 gate_up on dp4a through the TMA ring (2 stages x 3 CTAs per SM) as the default
# (LLMR_GPTOSS_MOE_DP4A=0 turns it off): its checks and back-to-back timings (--moe-decode-timing), the full gate on it,
# bench/decode off vs default twice, bench/throughput 1 / 8 / 64 streams.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels-moe.txt 2>&1; echo "kernels-moe rc=$? ${SECONDS}s"
grep -E "^FAIL|contribution|checks|timing (gate_up|down)|MoE block fused( \(|, dp4a)" $O/kernels-moe.txt | cut -c1-200
timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g --full 2>&1 | tee $O/gate.txt
for f in kernels parity batching20b serving20b; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
grep -E "^FAIL" $O/kernels.txt | cut -c1-200 | head -4
echo "gate ${SECONDS}s"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== fp32 gate_up (LLMR_GPTOSS_MOE_DP4A=0)"; LLMR_GPTOSS_MOE_DP4A=0 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== default (dp4a ring gate_up)"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
timeout 150 $B/bench/throughput --model /tmp/m20b --streams 1,8,64 > $O/tp.txt 2>&1; echo "tp rc=$?"; grep -E "^ +(1|8|64) +[0-9]+ +[0-9]+ " $O/tp.txt
echo "total ${SECONDS}s"
