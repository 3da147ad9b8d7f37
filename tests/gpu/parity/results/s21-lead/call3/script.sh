#!/bin/bash
# session 21 call 3: the full engine gate with the serving check's batching comparison judged by logprobs
# (e2e/gpu/near_tie.py: fp32-level agreement, logit near-ties, at most 3 knife-edges of 8 after >= 4 shared
# tokens; calls 1-2) and step 34 on by default; then bench/throughput (1 / 8 / 64 streams) and bench/prefill of
# 64-192 tokens with step 34 on and off.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; mkdir -p $O/gate; cp /tmp/g/gate/*.txt $O/gate/ 2>/dev/null
grep -hE "^request [0-9]|8 concurrent|FAIL" /tmp/g/gate/serving20b.txt | cut -c1-300 | head -12
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
timeout 110 $B/bench/throughput --model /tmp/m20b --streams 1,8,64 > $O/tp.txt 2>&1; echo "tp rc=$? ${SECONDS}s"
grep -E "^ +(1|8|64) +[0-9]+ " $O/tp.txt
for v in 1 0; do
  LLMR_GPTOSS_PROMPT_MOE_F16=$v timeout 60 $B/bench/prefill --model /tmp/m20b --lengths 64,128,192 > $O/prefill-f16-$v.txt 2>&1
  echo "prefill step34=$v rc=$?"; grep -E "^ +(64|128|192) " $O/prefill-f16-$v.txt
done
echo "total ${SECONDS}s"
