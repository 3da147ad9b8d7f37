#!/bin/bash
# Prepared in session 34 for the next session's first GPU call (not run). What bounds gptoss_mxfp4_prompt_gemm (~210
# TFLOP/s against cuBLAS's ~440 at 4,096 tokens): ncu of its 128-row form (a 1,024-token prompt; call 4's filter caught
# other kernels: the demangled name is mxfp4_prompt_gemm_kernel<(int)16, (bool)0>) and of its 64-row form, with the
# pipes' utilization and the warps' stall reasons; then bench/prefill with it at every length for the record. Build
# main, tests/gpu/pack.sh --out .gpu-lead/pkg, carry .gpu-lead/pkg.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for f in 16 8; do
  LLMR_GPTOSS_PROMPT_MMA=4096 timeout 150 $NCU --clock-control none --kernel-name-base demangled \
    --kernel-name "regex:prompt_gemm_kernel<.int.$f," --launch-count 2 --section SpeedOfLight --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section Occupancy --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --metrics smsp__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active \
    $B/bench/prefill --model /tmp/m20b --lengths $([ $f = 16 ] && echo 1024 || echo 512) --reps 1 > $O/ncu-n$((8 * f)).txt 2>&1
  echo "ncu n$((8 * f)) rc=$? ${SECONDS}s"
  grep -E "^  void|Duration|Issued Ipc|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Compute \(SM\)|gmma|Stall" \
    $O/ncu-n$((8 * f)).txt | head -24
done
LLMR_GPTOSS_PROMPT_MMA=4096 LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 90 $B/bench/prefill --model /tmp/m20b \
  --lengths 256,512,1024,2048,4096 --reps 3 > $O/prefill.txt 2>&1; echo "prefill rc=$?"; grep -E "^ +[0-9]+ " $O/prefill.txt
echo "total ${SECONDS}s"
