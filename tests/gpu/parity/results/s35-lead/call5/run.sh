#!/bin/bash
# Session 35 call 5 (H200): 1) ncu of the prompt kernel's 128-row launches (layer 0's gate_up and down) of the
# load's warm-up at 1,024 and at 4,096 tokens: per CTA the 4,096-token launches look ~1.6x slower than the
# 1,024-token ones (the experts' part against call 3's 356 us gate_up); 2) bench/prefill around the crossover with
# the expert cache (the kernel against cuBLAS at 512..1,024), and without the cache (kernel at every length).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1
echo "mkmodel rc=$? ${SECONDS}s"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
# warm-up lengths 768, 1024, 1536, 2048, 4096 take 128-row tiles: 48 launches each (24 layers x gate_up, down)
for skip in 48 192; do
  LLMR_GPTOSS_PROMPT_MMA=4096 timeout 150 $NCU --clock-control none --kernel-name-base demangled \
    --kernel-name "regex:prompt_gemm_kernel<.int.16," --launch-skip $skip --launch-count 2 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats --section LaunchStats \
    --print-details all $B/bench/prefill --model /tmp/m20b --lengths 4096 --reps 1 > $O/ncu-skip$skip.txt 2>&1
  echo "ncu skip $skip rc=$? ${SECONDS}s"
  grep -E "^  void|Duration|Compute \(SM\) Th|Memory Throughput|DRAM Through|L2 Cache Through|L2 Hit|No Eligible|Stall (Wait|Long|Math|Barrier|GMMA|Dispatch)  " \
    $O/ncu-skip$skip.txt | sed -E 's/\(const unsigned.*\) \(/(/' | head -36
done
for v in cublas mma640 mma768 mma1024; do
  M=0; case $v in mma640) M=640;; mma768) M=768;; mma1024) M=1024;; esac
  LLMR_GPTOSS_PROMPT_MMA=$M timeout 90 $B/bench/prefill --model /tmp/m20b --lengths 512,640,768,896,1024 --reps 5 > /tmp/pf.txt 2>&1
  echo "$v rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s ms | ", $1, $2}')"
  { echo "== $v"; cat /tmp/pf.txt; } >> $O/prefill.txt
done
LLMR_GPTOSS_EXPERT_CACHE=0 LLMR_GPTOSS_PROMPT_MMA=1048576 timeout 90 $B/bench/prefill --model /tmp/m20b \
  --lengths 256,512,1024,2048,4096 --reps 3 > /tmp/pf.txt 2>&1
echo "nocache rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s ms %s GB | ", $1, $2, $6}')"
{ echo "== nocache"; cat /tmp/pf.txt; } >> $O/prefill.txt
echo "total ${SECONDS}s"
