#!/bin/bash
# session 28 call 1: the engine at 4c69c62 (session 27's mend of the tensor-core split layout, mi_layout_of, and the
# review's mr_launch / gin refactor, none of which had run on a GPU). The T = 1 MoE checks 20 times (the routed
# tensor-core check must never fail), then the full gate with the tensor-core gate_up (LLMR_GPTOSS_MOE_DP4A=2), then
# bench/decode A B A B: dp4a (1) against tensor cores (2).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
fails=0
for r in $(seq 1 20); do
  timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > /tmp/moe-$r.txt 2>&1 || fails=$((fails+1))
  grep -E "^FAIL" /tmp/moe-$r.txt | cut -c1-200
done
echo "moe-decode-timing: $fails of 20 runs failed ${SECONDS}s"; cp /tmp/moe-1.txt /tmp/moe-20.txt $O/
export LLMR_GPTOSS_MOE_DP4A=2
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1
for r in 1 2; do for f in 1 2; do
  LLMR_GPTOSS_MOE_DP4A=$f timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 > $O/decode-f$f-r$r.txt 2>&1
  echo "decode MOE_DP4A=$f run $r rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ " $O/decode-f$f-r$r.txt
done; done
echo "total ${SECONDS}s"
