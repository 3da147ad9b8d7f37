#!/bin/bash
# session 21 call 9: step 40, packed prefill (LLMR_GPTOSS_PREFILL_PACK=1: whole prompts of 209+ tokens admitted together
# go through one forward, up to one slice of tokens, so the fp16 expert cache is read once per group). bench/throughput
# at 64 and 32 streams off / on / on / off, then the gate's batching and serving steps (tiny and 20b) with it on.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for v in 0 1 1 0; do LLMR_GPTOSS_PREFILL_PACK=$v timeout 90 $B/bench/throughput --model /tmp/m20b --streams 64,32 > $O/tp-$v-$SECONDS.txt 2>&1
  echo "pack=$v rc=$? ${SECONDS}s"; grep -E "^ +(32|64) +[0-9]+ |prefill" $O/tp-$v-*.txt | tail -4; done
LLMR_GPTOSS_PREFILL_PACK=1 timeout 330 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "batching serving" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; mkdir -p $O/gate; cp /tmp/g/gate/*.txt $O/gate/ 2>/dev/null
grep -hE "^request [0-9]|8 concurrent|FAIL" /tmp/g/gate/serving*.txt | cut -c1-200 | head -20
echo "total ${SECONDS}s"
