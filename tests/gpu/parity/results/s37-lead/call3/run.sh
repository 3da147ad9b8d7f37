#!/bin/bash
# Session 37 call 3 (H200): the stacked dense linears from 768 tokens (LLMR_GPTOSS_DENSE_STACKED_MIN_T=768, the weights
# kept from load) and the packed prefill's cap (LLMR_GPTOSS_PREFILL_PACK_MAX, default 1,023): A = the defaults (1,024 /
# 1,023), B = 768 / 1,023 (packed groups of 768-1,023 tokens take the stacked path, their prompts alone do not), C = 768 /
# 767 (a packed prompt takes the dense path it takes alone, smaller groups). bench/throughput at 8 / 32 / 64 streams,
# A B C A B C. Predicted: B +0.5-1% at 64 streams (a packed slice of 768+ tokens ~1.3 ms faster, ~half the 27 slices),
# C -1% (more slices). Then the gate's self-test, parity, batching (tiny and 20b) and serving (tiny and 20b) with B
# (the kernels step does not read these settings; call 2 ran it on this engine).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for r in 1 2; do for v in A B C; do
  MT=1024; PM=1023; case $v in B) MT=768 ;; C) MT=768; PM=767 ;; esac
  LLMR_GPTOSS_DENSE_STACKED_MIN_T=$MT LLMR_GPTOSS_PREFILL_PACK_MAX=$PM timeout 60 $B/bench/throughput --model /tmp/m20b \
    --streams 8,32,64 > /tmp/tp.txt 2>&1
  echo "$v run $r rc=$? ${SECONDS}s: $(grep -E '^ +(8|32|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s (p99 %s) ", $1, $5, $7}')"
  grep -E "^64 streams, wall" /tmp/tp.txt | cut -c1-100; { echo "== $v run $r"; cat /tmp/tp.txt; } >> $O/throughput.txt
done; done
LLMR_GPTOSS_DENSE_STACKED_MIN_T=768 timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g --full \
  --steps "selftest parity batching serving" > $O/gate-768.txt 2>&1
echo "gate (768 / 1,023) rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-768.txt
grep -h "FAIL" /tmp/g/gate/*.txt | head -8 | cut -c1-200
echo "total ${SECONDS}s"
