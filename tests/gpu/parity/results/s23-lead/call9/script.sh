#!/bin/bash
# session 23 call 9: the dense tensor-core entry points take their split count as an argument (no more save / set /
# restore of tc.splits around the batched step's calls): the gate's kernels, parity and batching steps (tiny and 20b),
# and 64 streams against call 8.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 330 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels parity batching" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "checks, [0-9]+ failed|^FAIL" /tmp/g/gate/kernels.txt | cut -c1-160 | tail -5
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
timeout 50 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/tp.txt 2>&1; echo "tp rc=$? ${SECONDS}s"; grep -E "^ +64 +[0-9]+ " $O/tp.txt
echo "total ${SECONDS}s"
