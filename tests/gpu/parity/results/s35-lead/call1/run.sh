#!/bin/bash
# Prepared in session 34 for the next session's first GPU call (not run). gptoss_mxfp4_prompt_gemm reaches ~210 TFLOP/s
# against cuBLAS's ~440 at 4,096 tokens, and what bounds it is not measured. 1) prompt-sw128.diff (this folder; compile-
# checked only): B in wgmma's 128-byte swizzle instead of the no-swizzle core-matrix layout, which wgmma may read at
# less than its rate: the kernel checks on it (--tc-checks: every prompt_gemm line within its bounds), then
# bench/prefill with the kernel at every length, the diff against main A B A B; 2) ncu of both forms' 128-row launches
# (the demangled name is mxfp4_prompt_gemm_kernel<(int)16, (bool)0>; call 4's filter caught other kernels).
# Preparation: apply the diff to main and build into build/ (so its gptoss_kernels checks the swizzled form); build
# main as it is in a worktree (git worktree add /tmp/base && make -C /tmp/base -j2); then
# tests/gpu/pack.sh --out .gpu-lead/pkg --alt base:/tmp/base, and carry .gpu-lead/pkg.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 & MK=$!
timeout 150 $B/tests/gpu/gptoss_kernels --tc-checks > $O/tc-checks.txt 2>&1; echo "tc-checks rc=$? ${SECONDS}s"
grep -E "prompt_gemm" $O/tc-checks.txt | cut -c1-160; grep -E "^FAIL|FAIL " $O/tc-checks.txt | head; tail -1 $O/tc-checks.txt
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
SW=$B/engines/gptoss_cuda/libgptoss_cuda.so BASE=/tmp/B/alt/base/engines/gptoss_cuda/libgptoss_cuda.so
for r in 1 2; do for v in base sw; do
  E=$SW; [ $v = base ] && E=$BASE
  LLMR_GPTOSS_PROMPT_MMA=4096 timeout 90 $B/bench/prefill --engine $E --model /tmp/m20b --lengths 256,512,1024,2048,4096 \
    --reps 3 > /tmp/pf.txt 2>&1
  echo "prefill $v run $r rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s ms | ", $1, $2}')"
  { echo "== $v run $r"; cat /tmp/pf.txt; } >> $O/prefill.txt
done; done
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for v in sw base; do
  E=$SW; [ $v = base ] && E=$BASE
  LLMR_GPTOSS_PROMPT_MMA=4096 timeout 120 $NCU --clock-control none --kernel-name-base demangled \
    --kernel-name "regex:prompt_gemm_kernel<.int.16," --launch-count 2 --section SpeedOfLight --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section Occupancy --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis $B/bench/prefill --engine $E --model /tmp/m20b --lengths 1024 --reps 1 \
    > $O/ncu-$v.txt 2>&1
  echo "ncu $v rc=$? ${SECONDS}s"
  grep -E "^  void|Duration|Issued Ipc|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Compute \(SM\)|Stall" \
    $O/ncu-$v.txt | head -16
done
echo "total ${SECONDS}s"
