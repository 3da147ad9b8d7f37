#!/bin/bash
# session 20 call 4: the full engine gate with the F16 form's pre-staged rows (from 64 pairs) on, then
# bench/throughput at 1 / 8 / 64 streams.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 480 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; mkdir -p $O/gate; cp /tmp/g/gate/*.txt $O/gate/ 2>/dev/null
grep -hE "checks, [0-9]+ failed|FAIL" /tmp/g/gate/kernels.txt | head -5
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
timeout 100 $B/bench/throughput --model /tmp/m20b --streams 1,8,64 > $O/tp.txt 2>&1; echo "tp rc=$? ${SECONDS}s"
grep -E "^ +(1|8|64) +[0-9]+ " $O/tp.txt
echo "total ${SECONDS}s"
