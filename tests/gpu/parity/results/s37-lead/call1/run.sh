#!/bin/bash
# Session 37 call 1 (prepared in session 36 as s36-lead/next/next-call.sh; run as is, plus the batch-1 profile with
# and without the tiled layout at the end, to find which T = 1 kernel the tiled layout slows).
# persist-jobs.diff (compile-checked, no spills, no wgmma serialization; applies to main after 0e5435c): the prompt
# kernel (moe_mma_prompt.cu) as a loop over jobs. With LLMR_GPTOSS_PROMPT_MMA_PERSIST=1 a launch runs one CTA an SM,
# each beginning its next job's loads (phase 0 of its rows by the tensor copy engine, its first weights into registers
# and L2) after its products and before its stores; 0 (the diff's default) keeps a CTA a job, the same work as main.
# Why: one CTA an SM (193 KB of shared memory, 168 registers x 384 threads) leaves the tensor cores idle during each
# CTA's first loads and last stores; session 35's swiglu-epilogue measured ~2.9 us a CTA for a heavier epilogue, and a
# 4,096-token gate_up runs ~36 waves of ~35 us CTAs (call 4). Predicted: 5-8% of the kernel's 57 ms at 4,096 tokens
# without the expert cache (3-4 ms), less at short chunks (fewer jobs a CTA). A 128-row launch's narrow jobs (64 rows or
# fewer) now run in a second loop after the wide ones (one loop with both forms spilled ~600 bytes; a call between them
# serialized the wgmma), also with PERSIST=0. test_tc gains a 528-job case (T=1024, I=1024) so that with PERSIST=1 CTAs
# run several jobs.
# swiglu-regs.diff (compile-checked; applies alone or after persist-jobs.diff): the fp16 experts' SwiGLU kernel
# (tc_swiglu_f16_kernel, 4.8 ms of a 4,096-token prompt at ~2.3 TB/s in call 4) with the row's activations in
# registers, every load of the row issued first (6 x 16 bytes a thread in flight, 48 registers, 5 blocks an SM; was
# one load at a time through shared memory); the same bits; a new test_tc case (I = 3,200) keeps the shared-memory
# form covered. Predicted 0.5-1 ms at 4,096 tokens.
# Preparation: build main into build/; for each diff, cp -a the tree to /tmp/persist (/tmp/swregs), git apply
# tests/gpu/parity/results/s36-lead/next/persist-jobs.diff (swiglu-regs.diff) there, make (engine and tests);
# tests/gpu/pack.sh --out .gpu-lead/pkg --alt persist:/tmp/persist --alt swregs:/tmp/swregs; carry .gpu-lead/pkg.
# Then merge the winners: --tc-checks and the full gate, with and without the expert cache.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; P=/tmp/B/alt/persist; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for r in 1 2; do for v in base p0 p1 sw; do for c in 0 2; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; case $v in p0|p1) E=$P/engines/gptoss_cuda/libgptoss_cuda.so ;;
    sw) E=/tmp/B/alt/swregs/engines/gptoss_cuda/libgptoss_cuda.so ;; esac
  PS=0; [ $v = p1 ] && PS=1
  LLMR_GPTOSS_PROMPT_MMA_PERSIST=$PS LLMR_GPTOSS_EXPERT_CACHE=$c LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 60 $B/bench/prefill \
    --engine $E --model /tmp/m20b --lengths 256,512,1024,2048,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "$v cache=$c $r rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s | ", $1, $2}') ${SECONDS}s"
  { echo "== $v cache $c $r"; cat /tmp/pf.txt; } >> $O/prefill.txt
done; done; done
LLMR_GPTOSS_PROMPT_MMA_PERSIST=0 timeout 300 $P/tests/gpu/gptoss_kernels --tc-checks > $O/tc-p0.txt 2>&1 &
T0=$!
timeout 300 /tmp/B/alt/swregs/tests/gpu/gptoss_kernels --tc-checks > $O/tc-sw.txt 2>&1 &
T1=$!
LLMR_GPTOSS_PROMPT_MMA_PERSIST=1 timeout 300 $P/tests/gpu/gptoss_kernels --tc-checks > $O/tc-p1.txt 2>&1
echo "tc-checks persist=1 rc=$? $(tail -1 $O/tc-p1.txt) ${SECONDS}s"; grep FAIL $O/tc-p1.txt | head -5 | cut -c1-200
wait $T0; echo "tc-checks persist=0 rc=$? $(tail -1 $O/tc-p0.txt) ${SECONDS}s"; grep FAIL $O/tc-p0.txt | head -5 | cut -c1-200
wait $T1; echo "tc-checks swiglu-regs rc=$? $(tail -1 $O/tc-sw.txt) ${SECONDS}s"; grep FAIL $O/tc-sw.txt | head -5 | cut -c1-200
for t in 1 0; do
  LLMR_GPTOSS_MOE_TILED=$t LLMR_GPTOSS_PROFILE=1 timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128 --tokens 32 > $O/profile-tiled$t.txt 2>&1
  echo "profile tiled=$t rc=$? ${SECONDS}s"; grep -E "gate_up|down|o_proj|fused norm|attention|total" $O/profile-tiled$t.txt | cut -c1-100
done
echo "total ${SECONDS}s"
