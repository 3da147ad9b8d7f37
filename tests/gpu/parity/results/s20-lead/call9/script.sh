#!/bin/bash
# session 20 call 9: prompt chunks' experts on the F16 form (LLMR_GPTOSS_PROMPT_MOE_F16, with pre-staged rows below 256
# tokens) against the bf16 2-part form: bench/prefill at 64..640 tokens with the tensor-core experts forced up to 640
# tokens (LLMR_GPTOSS_MOE_MMA_PREFILL=640) and with cuBLAS always (=0), then the default crossover (208); bench/throughput
# at 64 streams for crossovers 208 / 320 / 448 with the F16 form and 208 without; then the gate without its kernel step
# (the kernels are call 4's) on the 20b too (--full).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
L=64,128,192,256,320,384,448,512,640
{ for v in "F16=0 PRE=640" "F16=1 PRE=640" "F16=0 PRE=0" "F16=0 PRE=208" "F16=1 PRE=208"; do
    set -- $v; echo "=== PROMPT_MOE_${1} MOE_MMA_${2}"
    env LLMR_GPTOSS_PROMPT_MOE_${1} LLMR_GPTOSS_MOE_MMA_${2/PRE/PREFILL} timeout 120 $B/bench/prefill --model /tmp/m20b --lengths $L --reps 3 2>&1 | grep -E "^ +[0-9]+ |rror"
done; } > $O/prefill.txt 2>&1; cat $O/prefill.txt; echo "prefill ${SECONDS}s"
{ for v in "1 208" "1 320" "1 448" "0 208" "1 320" "1 208"; do
    set -- $v; echo "=== PROMPT_MOE_F16=$1 MOE_MMA_PREFILL=$2"
    LLMR_GPTOSS_PROMPT_MOE_F16=$1 LLMR_GPTOSS_MOE_MMA_PREFILL=$2 timeout 120 $B/bench/throughput --model /tmp/m20b --streams 64 2>&1 | grep -E "^ +64 +[0-9]+ |prefill|rror"
done; } > $O/tp.txt 2>&1; cat $O/tp.txt; echo "tp ${SECONDS}s"
timeout 420 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "selftest parity batching serving" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; mkdir -p $O/gate; cp /tmp/g/gate/*.txt $O/gate/ 2>/dev/null
grep -hE "rel|max" /tmp/g/gate/parity.txt | tail -12
echo "total ${SECONDS}s"
