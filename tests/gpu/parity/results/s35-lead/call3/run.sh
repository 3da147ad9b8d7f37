#!/bin/bash
# Session 35 call 3 (H200): gptoss_mxfp4_prompt_gemm with B staged by the tensor copy engine (one thread, a 2D tensor
# map in the 128-byte swizzle, an mbarrier per buffer) instead of every thread's cp.async (call 2: without the staging
# the experts of a 4,096-token prompt take 47.5 ms against 76.1). 1) the kernel checks (--tc-checks); 2) bench/prefill,
# the kernel at every length, against call 1's form (alt sw) A B A B, part by part; 3) ncu of the 128-row launch.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 & MK=$!
timeout 150 $B/tests/gpu/gptoss_kernels --tc-checks > $O/tc-checks.txt 2>&1; echo "tc-checks rc=$? ${SECONDS}s"
grep -E "prompt_gemm.*(800|precise|2880)" $O/tc-checks.txt | cut -c1-160; grep -E "^FAIL|FAIL " $O/tc-checks.txt | head; tail -1 $O/tc-checks.txt
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
for r in 1 2; do for v in sw tma; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; [ $v = sw ] && E=/tmp/B/alt/sw/engines/gptoss_cuda/libgptoss_cuda.so
  LLMR_GPTOSS_PROMPT_MMA=4096 LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 90 $B/bench/prefill --engine $E --model /tmp/m20b \
    --lengths 256,512,1024,2048,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "$v $r rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s ms | ", $1, $2}')"
  echo "   $(grep -E 'prefill profile' /tmp/pf.txt | tail -15 | awk 'NR%3==0' | sed -E 's/.*T=([0-9]+).*experts ([0-9.]+) ms.*/T=\1 experts \2/' | tr '\n' ' ')"
  { echo "== $v $r"; cat /tmp/pf.txt; } >> $O/prefill.txt
done; done
LLMR_GPTOSS_PROMPT_MMA=0 LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 60 $B/bench/prefill --model /tmp/m20b --lengths 256,512,1024,2048,4096 --reps 3 > /tmp/pf.txt 2>&1
echo "cublas rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s ms | ", $1, $2}')"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
LLMR_GPTOSS_PROMPT_MMA=4096 timeout 150 $NCU --clock-control none --kernel-name-base demangled \
  --kernel-name "regex:prompt_gemm_kernel<.int.16," --launch-count 1 --section SpeedOfLight --section WarpStateStats \
  --section SchedulerStats --section InstructionStats --print-details all \
  $B/bench/prefill --model /tmp/m20b --lengths 1024 --reps 1 > $O/ncu-tma.txt 2>&1
echo "ncu rc=$? ${SECONDS}s"
grep -E "Duration|Issued Ipc|No Eligible|Executed Instructions  |Stall (Wait|Long|Math|Dispatch|Barrier|GMMA|Not Sel)" $O/ncu-tma.txt | head -16
echo "total ${SECONDS}s"
