#!/bin/bash
# Session 32 call 1: run as prepared, now on an H200 (the lent kind changed from the H100).
# Prepared in session 31 for the next session's first GPU call (not run): the full gate on main as session 31 left it.
# c773e9d (the F16 decode's scaled tables) ran only the expert checks and bench/throughput (call 7): its bits are the
# ones the gate passed in call 4, but the gate has not run on it, nor on the review's mends after it (76855fa, e52016c,
# e5b5f41: host code, the kernels' PTX unchanged). Then bench/decode and bench/throughput on the
# defaults, and the expert checks' timing lines. Build main into build/ and pack it (/tmp/pkg.sh-style).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 480 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-250 | head -10
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 > $O/decode.txt 2>&1; echo "decode rc=$? ${SECONDS}s"
grep -E "^ +[0-9]+ |tiled" $O/decode.txt | cut -c1-200
timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8,32,64 > $O/tp.txt 2>&1; echo "throughput rc=$? ${SECONDS}s"
grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |tiled" $O/tp.txt | cut -c1-220
echo "total ${SECONDS}s"
