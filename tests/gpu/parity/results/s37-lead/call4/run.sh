#!/bin/bash
# Session 37 call 4 (H200): why the stacked dense linears from 768 tokens (B of call 3) lose in bench/throughput's
# packed slices while they win for one 768-token prompt. (1) bench/throughput at 64 streams, A (defaults) and B
# (LLMR_GPTOSS_DENSE_STACKED_MIN_T=768), with LLMR_GPTOSS_PREFILL_PROFILE=1: each slice's parts; (2) bench/prefill at
# lengths the load's warm-up does not cover (777, 901, 1,000, 1,031, 2,053, 4,093) beside covered ones, A and B.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for v in A B; do
  MT=1024; [ $v = B ] && MT=768
  LLMR_GPTOSS_DENSE_STACKED_MIN_T=$MT LLMR_GPTOSS_PREFILL_PROFILE=1 timeout 60 $B/bench/throughput --model /tmp/m20b \
    --streams 64 > $O/tp-profile-$v.txt 2>&1
  echo "$v throughput rc=$? ${SECONDS}s: $(grep -E '^ +64 +[0-9]+ +[0-9]+ ' $O/tp-profile-$v.txt | awk '{print $5}')"
  grep -E "^64 streams, wall" $O/tp-profile-$v.txt | cut -c1-100
  grep "prefill profile" $O/tp-profile-$v.txt | grep -v "pos0=0: norm" | head -0
  grep "prefill profile" $O/tp-profile-$v.txt | awk '{for(i=1;i<=NF;i++) if($i ~ /^T=/) t=substr($i,3); if (t >= 768) n++} END {print "slices of 768+ tokens:", n}'
done
for v in A B; do for c in 0 2; do
  MT=1024; [ $v = B ] && MT=768
  LLMR_GPTOSS_DENSE_STACKED_MIN_T=$MT LLMR_GPTOSS_EXPERT_CACHE=$c timeout 60 $B/bench/prefill --model /tmp/m20b \
    --lengths 768,777,901,1000,1024,1031,2048,2053,4093,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "$v cache=$c rc=$?: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s | ", $1, $2}') ${SECONDS}s"
  { echo "== $v cache $c"; cat /tmp/pf.txt; } >> $O/prefill.txt
done; done
echo "total ${SECONDS}s"
