#!/bin/bash
# session 30 call 1: the full gate on main as session 29 left it (its review's two refactors, 1a14b97 and 416d0cf,
# compile-checked only until now); then bench/decode with the T = 1 tensor-core gate_up's diagnostics set in the
# graph (an experiment engine, alt/diag: LLMR_EXP_RING_DIAG 0 = normal, 3 = no activation split, 1 = no arithmetic,
# 4 = neither): what the decode step would gain if the gate_up's split, or its arithmetic, cost nothing. The tokens
# are garbage under 1/3/4 (timing only); the bytes read are the same.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; A=/tmp/B/alt
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL|request [0-9]" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head -20
grep -hE "sampl" /tmp/g/gate/kernels.txt | grep -c "^ok" ; tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2; do for d in 0 3 1 4; do
  LLMR_EXP_RING_DIAG=$d timeout 60 $B/bench/decode --model /tmp/m20b --engine $A/diag/engines/gptoss_cuda/libgptoss_cuda.so --contexts 128,1024 > /tmp/d.txt 2>&1
  echo "decode diag=$d run $r rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ |^context" /tmp/d.txt; cat /tmp/d.txt >> $O/decode-diag.txt
done; done
timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 > /tmp/d.txt 2>&1; echo "decode main rc=$? ${SECONDS}s"
grep -E "^ +[0-9]+ |^context" /tmp/d.txt; cat /tmp/d.txt >> $O/decode-main.txt
echo "total ${SECONDS}s"
