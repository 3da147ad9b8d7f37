#!/bin/bash
# session 27 call 1: the T = 1 gate_up ring with its sums on integer tensor cores (LLMR_GPTOSS_MOE_DP4A=2):
# the 20b's T = 1 MoE block checked and timed (every form, each alone), bench/decode A B A B against the dp4a
# consumers, and the gate's parity step with it on.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 120 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe-decode.txt 2>&1; echo "moe-decode rc=$? ${SECONDS}s"
grep -E "^(FAIL|[0-9]+ checks)|tensor-core|dp4a ring" $O/moe-decode.txt | cut -c1-220
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1
for r in 1 2 3; do for f in 1 2; do
  LLMR_GPTOSS_MOE_DP4A=$f timeout 60 $B/bench/decode --model /tmp/m20b > $O/decode-f$f-r$r.txt 2>&1; echo "decode form $f run $r rc=$? ${SECONDS}s"
  grep -E "^ +[0-9]+ " $O/decode-f$f-r$r.txt | head -4
done; done
LLMR_GPTOSS_MOE_DP4A=2 timeout 200 tests/gpu/gate.sh --build $B --out /tmp/g --steps parity > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head
tar -C /tmp -cJf $O/parity-logs.txz g
echo "total ${SECONDS}s"
