#!/bin/bash
# session 28 call 4: step 59, the router finish's remaining latency in o_proj's last block: one acq_rel atomic
# instead of fence + atomic + fence, the partial rows' bulk copy in 4 pieces on 4 barriers (the sums start on the
# first piece), the top-4's softmax, ids and group table written by lanes 0..3 at once. The T = 1 MoE checks 8 times
# (both finish modes bit for bit, 6 times each per run), bench/decode A B A B A B against the engine at 58663dd
# (alt/prev), then the full gate.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
fails=0
for r in $(seq 1 8); do
  timeout 60 $B/tests/gpu/gptoss_kernels --moe-decode-timing > /tmp/moe-$r.txt 2>&1 || fails=$((fails+1))
  grep -E "^FAIL" /tmp/moe-$r.txt | cut -c1-240
done
echo "moe-decode-timing: $fails of 8 runs failed ${SECONDS}s"; cp /tmp/moe-1.txt $O/
grep -hE "timing o_proj|no activation split|tensor-core ring T=1" /tmp/moe-1.txt /tmp/moe-2.txt | cut -c1-240
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1
for r in 1 2 3; do for v in prev:/tmp/B/alt/prev/engines/gptoss_cuda/libgptoss_cuda.so new:$B/engines/gptoss_cuda/libgptoss_cuda.so; do
  n=${v%%:*}; so=${v#*:}
  timeout 60 $B/bench/decode --model /tmp/m20b --engine $so --contexts 128,1024 > /tmp/decode-$n-r$r.txt 2>&1
  echo "decode $n run $r rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ " /tmp/decode-$n-r$r.txt
done; done
cat /tmp/decode-*.txt > $O/decode.txt
timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-300 | head
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
echo "total ${SECONDS}s"
