#!/bin/bash
# session 19 call 16: the batched step's fallbacks (host code only): the gate's batching step on tiny and the 20b, and
# bench/throughput at 8 streams.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 300 tests/gpu/gate.sh --build $B --out /tmp/g --steps "batching" --full 2>&1 | tail -3
cp -r /tmp/g/gate $O/ 2>/dev/null
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8 2>&1 | grep -E "^ +8 +[0-9]+ |WARN|rror"
rm -rf /tmp/m20b
echo "total ${SECONDS}s"
