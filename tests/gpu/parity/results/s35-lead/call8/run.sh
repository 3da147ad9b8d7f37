#!/bin/bash
# Session 35 call 8 (H200): the full gate on the engine as it lands (the prompt kernel with B in the 128-byte swizzle,
# staged by the tensor copy engine, rastered in groups; 128-row tiles from 64 rows an expert; the kernel up to 768
# tokens with the expert cache, every chunk above 208 without it, the experts tiled in place either way); then
# bench/prefill and bench/throughput at 64 streams on the defaults.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"; grep -E "^GATE" $O/gate.txt
grep -E "FAIL" /tmp/g/gate/kernels.txt | head -5
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1
timeout 60 $B/bench/prefill --model /tmp/m20b --lengths 256,512,768,1024,2048,4096 --reps 3 > $O/prefill.txt 2>&1
echo "prefill rc=$?: $(grep -E '^ +[0-9]+ ' $O/prefill.txt | awk '{printf "%s %s ms %s GB | ", $1, $2, $6}')"
timeout 60 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/throughput.txt 2>&1
echo "throughput rc=$?"; grep -E "^ +64 |VRAM" $O/throughput.txt | head -2
echo "total ${SECONDS}s"
