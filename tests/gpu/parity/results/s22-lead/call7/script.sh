#!/bin/bash
# session 22 call 7: after the review mend (rmsnorm_kernel and rows_norm_split_kernel share gptoss_block_sum, the same
# sum order): the gate's kernels, self-test, parity and batching steps on tiny, and 64 streams once.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --steps "kernels selftest parity batching" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "rows_" /tmp/g/gate/kernels.txt
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
timeout 100 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/tp.txt 2>&1; echo "tp rc=$? ${SECONDS}s"
grep -E "^ +64 +[0-9]+ " $O/tp.txt
echo "total ${SECONDS}s"
