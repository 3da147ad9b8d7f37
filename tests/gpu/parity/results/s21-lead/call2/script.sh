#!/bin/bash
# session 21 call 2: call 1's 20b serving check found request 1's token 36 0.139 nats apart alone and batched (the
# same tokens; every other token within 2e-5). Is it a knife-edge (a router's 4th/5th expert near-tie, which
# fp32-level changes move) or a systematic difference? The check three ways: as is, with the batched experts on
# their 3-part bf16 form (LLMR_GPTOSS_BATCH_MOE_F16=0), with the lone path's router as its own kernel
# (LLMR_GPTOSS_ROUTER_SPLIT=0). A knife-edge moves or vanishes; a fault stays. Answers kept in $OUT/<variant>/.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
for v in DEFAULT=1 LLMR_GPTOSS_BATCH_MOE_F16=0 LLMR_GPTOSS_ROUTER_SPLIT=0; do
  n=${v%%=*}
  env $v LLMR_E2E_KEEP=$O/$n LLMR_BUILD=$B FULL=1 timeout 170 bash e2e/gpu/serving.sh > $O/serving-$n.txt 2>&1
  echo "== $v: rc=$? ${SECONDS}s"; grep -E "^request [0-9]|^ok: 8|FAIL" $O/serving-$n.txt | cut -c1-400
done
echo "total ${SECONDS}s"
