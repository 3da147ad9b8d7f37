#!/bin/bash
# Session 34 call 3 (H200): gptoss_mxfp4_prompt_gemm on warpgroup MMA (call 2's mma.sync form: correct, 2.7x slower
# than cuBLAS). 1) the prompt matmuls' checks (--tc-checks); 2) bench/prefill with it and without, part by part;
# 3) ncu of the kernel in a 1,024-token prefill; 4) bench/throughput 64 streams, it against cuBLAS, A B A B.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 & MK=$!
timeout 150 $B/tests/gpu/gptoss_kernels --tc-checks > $O/tc-checks.txt 2>&1; echo "tc-checks rc=$? ${SECONDS}s"
grep -E "prompt_gemm" $O/tc-checks.txt | cut -c1-200; grep -E "^FAIL|FAIL " $O/tc-checks.txt | head -10; tail -1 $O/tc-checks.txt
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
for v in 0 1048576; do
  LLMR_GPTOSS_PROMPT_MMA=$v LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 90 $B/bench/prefill --model /tmp/m20b --lengths 256,512,1024,2048,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "prefill PROMPT_MMA=$v rc=$?"; grep -E "^ +[0-9]+ " /tmp/pf.txt
  grep -E "prefill profile" /tmp/pf.txt | awk 'NR%4==0' | sed 's/gptoss_cuda prefill profile //' | cut -c1-200
  { echo "== PROMPT_MMA=$v"; cat /tmp/pf.txt; } >> $O/prefill.txt
done
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 120 $NCU --clock-control none --kernel-name mxfp4_prompt_gemm_kernel --launch-skip 20 --launch-count 2 \
  --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section InstructionStats --section Occupancy \
  --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  $B/bench/prefill --model /tmp/m20b --lengths 1024 --reps 1 > $O/ncu-prompt.txt 2>&1; echo "ncu rc=$? ${SECONDS}s"
grep -E "Duration|Registers Per|Achieved Occupancy|Issued Ipc|No Eligible|Warp Cycles Per Issued|DRAM Throughput|L2 Cache Throughput|Executed Instructions  |Compute \(SM\)|Grid Size|Stall|stall" $O/ncu-prompt.txt | head -30
for r in 1 2; do for v in 0 1048576; do
  LLMR_GPTOSS_PROMPT_MMA=$v timeout 60 $B/bench/throughput --model /tmp/m20b --streams 64 > /tmp/t.txt 2>&1
  echo "tp PROMPT_MMA=$v run $r rc=$?: $(grep -E '^ +64 +[0-9]+ +[0-9]+ ' /tmp/t.txt) | $(grep -oE 'prefill [0-9.]+ s GPU \([0-9]+ slices, [0-9]+ tokens, [0-9.]+ ms/slice\)' /tmp/t.txt)"
  { echo "== PROMPT_MMA=$v run $r"; cat /tmp/t.txt; } >> $O/tp64.txt
done; done
echo "total ${SECONDS}s"
