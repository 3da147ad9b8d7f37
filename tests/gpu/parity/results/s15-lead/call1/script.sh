#!/bin/bash
# session 15 call 1: the engine gate (tests/gpu/gate.sh) on main a6542b7, its first run on a GPU; then the
# batch-1 decode baseline and per-kernel profile of the full-size 20b.
B=$PWD/.gpu-lead/build; O=$OUT
mkdir -p /tmp/cache && tar xzf .gpu-lead/tokz/tok.tgz -C /tmp/cache && export LLMR_CACHE=/tmp/cache
nvidia-smi --query-gpu=name --format=csv,noheader
SECONDS=0
timeout 480 tests/gpu/gate.sh --build $B --out /tmp/g 2>&1 | tee $O/gate.txt
echo "gate took ${SECONDS}s"
for f in kernels selftest parity batching serving; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
$B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | tee $O/decode.txt | grep -E "^ +[0-9]+ |roofline|bandwidth"
LLMR_GPTOSS_PROFILE=1 $B/bench/decode --model /tmp/m20b --contexts 128 > $O/decode-prof.txt 2>&1; grep -E "us " $O/decode-prof.txt
echo "total ${SECONDS}s"
