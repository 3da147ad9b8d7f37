#!/bin/bash
# Session 36 call 1 (H200): session 35's prepared next-call.sh (s35-lead/next), speed first, each diff alone against
# main without the expert cache, A B A B; plus all3 = nosync + swiglu + empty applied together; then the correctness
# of the two kernel variants (gptoss_kernels --tc-checks for all3 and for mixed), which decide what can merge.
O=$OUT; mkdir -p /tmp/B /tmp/cache /tmp/tk
# one tar (build/, alt/, tk/) in xz with a 256 MiB window: the near-identical engines then cost ~1 MB each
xz -dc .gpu-lead/pkg/all.tar.xz | tar -C /tmp/B -xf - && xz -dc .gpu-lead/pkg/tok.tar.xz | tar -C /tmp/cache -xf -
mv /tmp/B/tk/* /tmp/tk/
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
eng() { [ $1 = base ] && echo $B/engines/gptoss_cuda/libgptoss_cuda.so || echo /tmp/B/alt/$1/engines/gptoss_cuda/libgptoss_cuda.so; }
for r in 1 2; do for v in base nosync swiglu empty mixed all3; do
  LLMR_GPTOSS_EXPERT_CACHE=0 LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 60 $B/bench/prefill --engine $(eng $v) --model /tmp/m20b \
    --lengths 256,512,1024,2048,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "$v $r rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s | ", $1, $2}') ${SECONDS}s"
  { echo "== $v $r"; cat /tmp/pf.txt; } >> $O/prefill.txt
done; done
for v in base all3 mixed; do
  LLMR_GPTOSS_EXPERT_CACHE=0 timeout 60 $B/bench/throughput --engine $(eng $v) --model /tmp/m20b --streams 64 > /tmp/tp.txt 2>&1
  echo "throughput $v rc=$?: $(grep -E '^ +64 ' /tmp/tp.txt | head -1) ${SECONDS}s"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput.txt
done
for v in all3 mixed; do
  timeout 170 /tmp/tk/$v/gptoss_kernels --tc-checks > $O/tc-$v.txt 2>&1
  echo "tc-checks $v rc=$?: $(grep -ciE 'fail' $O/tc-$v.txt) fail lines; $(tail -1 $O/tc-$v.txt) ${SECONDS}s"
done
echo "total ${SECONDS}s"
