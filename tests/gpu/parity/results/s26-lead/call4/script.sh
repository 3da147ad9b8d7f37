#!/bin/bash
# session 26 call 4: a bf16 KV cache's accuracy, emulated (K/V rounded to bf16 where they enter the pages,
# -DGPTOSS_KV_BF16_EMULATE, engine in alt/kvbf16): the gate's parity step (logits against transformers fp32) with it
# and with the default engine, same call.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
mkdir -p /tmp/B2 && cp -r $B /tmp/B2/ && cp /tmp/B/alt/kvbf16/engines/gptoss_cuda/libgptoss_cuda.so /tmp/B2/build/engines/gptoss_cuda/
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
for v in kvbf16:/tmp/B2/build default:$B; do n=${v%%:*}; b=${v#*:}
  timeout 200 tests/gpu/gate.sh --build $b --out /tmp/g-$n --steps parity > $O/gate-$n.txt 2>&1; echo "$n rc=$? ${SECONDS}s"
  grep -E "^GATE" $O/gate-$n.txt
done
tar -C /tmp -cJf $O/parity-logs.txz g-kvbf16 g-default
echo "total ${SECONDS}s"
