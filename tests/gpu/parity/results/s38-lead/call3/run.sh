#!/bin/bash
# Session 38 call 3 (H200): the full gate on main at 0cd264e (covers session 37's review commit adc73af, never run on a
# GPU) and, beside it, the self-test, parity and batching without the expert cache; first, pipes.cu: which pipe and
# what rate the instructions a cheaper weight decode could use get (prmt, lop3, the fp8 -> f16x2 conversion, hmul2).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
.gpu-lead/pkg/pipes > $O/pipes.txt 2>&1; echo "pipes rc=$?"; cat $O/pipes.txt
cuobjdump -sass .gpu-lead/pkg/pipes > /tmp/pipes.sass 2>&1; grep -o "F2FP[A-Z0-9._]*\|PRMT\|LOP3.LUT\|HMUL2[A-Z0-9._]*\|SHF[A-Z0-9._]*\|I2F[A-Z0-9._]*\|F2F[A-Z0-9._]*" /tmp/pipes.sass | sort | uniq -c
LLMR_GPTOSS_EXPERT_CACHE=0 timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
G0=$!
timeout 540 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $G0; echo "gate without the cache rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-nocache.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt | head -8 | cut -c1-200
echo "total ${SECONDS}s"
