#!/bin/bash
# Session 34 call 6 (H200): the full gate on the engine as it lands (gptoss_mxfp4_prompt_gemm for prompt chunks of
# 209-320 tokens by default: the parity's 300-token prompts and the packed short prompts' precise rows run on it), then
# bench/prefill without the expert cache (LLMR_GPTOSS_EXPERT_CACHE=0: cuBLAS dequantizes the experts per chunk), cuBLAS
# against the kernel at every length, for the next session.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 & MK=$!
timeout 440 tests/gpu/gate.sh --build $B --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-250 | head -10
grep -hE "prompt_gemm" /tmp/g/gate/kernels.txt | grep -c "^ok"; grep -hE "300|PASS|FAIL" /tmp/g/gate/parity.txt | tail -6 | cut -c1-200
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
for v in 0 1048576; do
  [ $SECONDS -lt 540 ] || break
  LLMR_GPTOSS_EXPERT_CACHE=0 LLMR_GPTOSS_PROMPT_MMA=$v timeout 50 $B/bench/prefill --model /tmp/m20b --lengths 256,512,1024,2048,4096 --reps 2 > /tmp/pf.txt 2>&1
  echo "no-cache prefill PROMPT_MMA=$v rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s ms | ", $1, $2}')"
  { echo "== no cache, PROMPT_MMA=$v"; cat /tmp/pf.txt; } >> $O/prefill-nocache.txt
done
echo "total ${SECONDS}s"
