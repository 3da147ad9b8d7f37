#!/bin/bash
# session 23 call 7 (call 1 never ran): the full gate on e1b9110 (steps 41 and 43 on by default): kernels, self-test, parity, batching and serving on tiny
# and the 20b, then the standing figures: bench/decode and bench/throughput 1 / 8 / 32 / 64 streams.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "checks, [0-9]+ failed|^FAIL" /tmp/g/gate/kernels.txt | tail -6
grep -hE "^request [0-9]|FAIL" /tmp/g/gate/serving20b.txt | cut -c1-200 | head -10
tar -C /tmp/g -czf $O/gate-logs.tgz gate
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
timeout 60 $B/bench/decode --model /tmp/m20b > $O/decode.txt 2>&1; echo "decode rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ +[0-9.]+ " $O/decode.txt
timeout 95 $B/bench/throughput --model /tmp/m20b --streams 1,8,32,64 > $O/tp.txt 2>&1; echo "tp rc=$? ${SECONDS}s"
grep -E "^ +(1|8|32|64) +[0-9]+ " $O/tp.txt
echo "total ${SECONDS}s"
