#!/bin/bash
# Session 34 call 1 (H200): measurements before any change. Engine: main + the Tp == 0 split mend (tc.cu).
# 1) ncu of the batched experts' default kernel (F16, pre-staged, tiled) at T = 64 and 16: where its warps wait.
# 2) the batch-1 profile with the experts tiled in place (2) and in the checkpoint's layout (0), A B A B.
# 3) bench/decode main against down-tiled-ldg.diff (s33-lead), A B A B.
# 4) prefill chunks of 256 / 512 / 1,024 tokens part by part (LLMR_GPTOSS_PREFILL_PROFILE=1), and the 64-stream
#    throughput with the batched step's and the prefill slices' profiles.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 & MK=$!
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for T in 64 16; do
  timeout 150 $NCU --clock-control none --kernel-name-base demangled --kernel-name regex:"true, true, true>" \
    --launch-skip 4 --launch-count 2 --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
    --section InstructionStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis $B/tests/gpu/gptoss_kernels --moe-timing $T > /tmp/ncu$T.txt 2>&1
  echo "ncu T=$T rc=$? ${SECONDS}s"; cat /tmp/ncu$T.txt >> $O/ncu.txt
  grep -E "^  void|Duration|Registers Per|Achieved Occupancy|Issued Ipc|No Eligible|Warp Cycles Per Issued|DRAM Throughput|Executed Instructions  " /tmp/ncu$T.txt | head -30
done
wait $MK; echo "mkmodel rc=$? ${SECONDS}s"
for r in 1 2; do for v in 2 0; do
  LLMR_GPTOSS_PROFILE=1 LLMR_GPTOSS_MOE_TILED=$v timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 --tokens 64 > /tmp/p.txt 2>&1
  echo "profile tiled=$v run $r rc=$?"; grep -E '^  (fused|attention|o_proj|MXFP4|lm_head|total)' /tmp/p.txt
  { echo "== tiled=$v run $r"; cat /tmp/p.txt; } >> $O/profile-all.txt
done; done
ALT=/tmp/B/alt/ldg/engines/gptoss_cuda/libgptoss_cuda.so
for r in 1 2; do for v in main ldg; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; [ $v = ldg ] && E=$ALT
  timeout 40 $B/bench/decode --engine $E --model /tmp/m20b --contexts 128,1024 --tokens 64 > /tmp/d.txt 2>&1
  echo "decode $v run $r rc=$?: $(grep -E '^ +(128|1024) ' /tmp/d.txt | awk '{printf "%s %s (%s) ", $1, $3, $NF}')"
  { echo "== $v run $r"; cat /tmp/d.txt; } >> $O/decode-ab.txt
done; done
LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 60 $B/bench/prefill --model /tmp/m20b --lengths 256,512,1024 --reps 2 > $O/prefill-profile.txt 2>&1
echo "prefill rc=$?"; grep -E "prefill profile|^ +[0-9]+ " $O/prefill-profile.txt | cut -c1-260
LLMR_GPTOSS_BATCH_PROFILE=1 LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 60 $B/bench/throughput --model /tmp/m20b --streams 64 > $O/tp64-profile.txt 2>&1
echo "throughput rc=$?"; grep -vE "prefill profile" $O/tp64-profile.txt | tail -14
grep -E "prefill profile" $O/tp64-profile.txt | awk '{print $4}' | sort | uniq -c | sort -rn | head -5
echo "total ${SECONDS}s"
