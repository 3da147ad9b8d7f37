#!/bin/bash
# Session 35 call 4 (H200): gptoss_mxfp4_prompt_gemm's CTAs rastered in groups of items (mp_raster,
# LLMR_GPTOSS_PROMPT_MMA_GROUP; 0 = call 3's order, where a 4,096-token gate_up reads its 94 MB of rows once per row
# block from HBM). 1) the kernel checks; 2) bench/prefill with the kernel at every length, groups 0 / 8 / 16 / 8, and
# cuBLAS on the expert cache, part by part; 3) parity of 20b-2l at 2,000 tokens in one prefill chunk (--piece 2048),
# the kernel's 128-row tiles against transformers, with the expert cache and without it.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 & MK=$!
timeout 170 $B/tests/gpu/gptoss_kernels --tc-checks > $O/tc-checks.txt 2>&1; echo "tc-checks rc=$? ${SECONDS}s"
grep -E "prompt_gemm.*(800|2880)" $O/tc-checks.txt | cut -c1-160; grep -E "^FAIL|FAIL " $O/tc-checks.txt | head; tail -1 $O/tc-checks.txt
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
for g in 0 8 16 8 cublas; do
  M=4096; [ $g = cublas ] && M=0
  LLMR_GPTOSS_PROMPT_MMA_GROUP=${g/cublas/8} LLMR_GPTOSS_PROMPT_MMA=$M LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 90 \
    $B/bench/prefill --model /tmp/m20b --lengths 256,512,1024,2048,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "group $g rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s ms | ", $1, $2}')"
  echo "   $(grep -E 'prefill profile' /tmp/pf.txt | tail -15 | awk 'NR%3==0' | sed -E 's/.*T=([0-9]+).*experts ([0-9.]+) ms.*/T=\1 experts \2/' | tr '\n' ' ')"
  { echo "== group $g"; cat /tmp/pf.txt; } >> $O/prefill.txt
done
rm -rf /tmp/m20b
for c in 1 0; do
  LLMR_GPTOSS_EXPERT_CACHE=$c LLMR_GPTOSS_PROMPT_MMA=4096 PARITY_WORK=/tmp/pw timeout 240 tests/gpu/parity/run.sh --build $B \
    --out /tmp/par$c --presets 20b-2l --seeds 1 --lengths 2000 --piece 2048 --no-unit > $O/parity-cache$c.txt 2>&1
  echo "parity cache=$c rc=$? ${SECONDS}s"; grep -E "VERDICT|ALL PASS|^FAIL|final logits" $O/parity-cache$c.txt | head -4
  grep -E "final logits" /tmp/par$c/reports.txt | head -2
done
echo "total ${SECONDS}s"
