#!/bin/bash
# session 27 call 7: where batch-1 time goes with steps 56-57 (LLMR_GPTOSS_PROFILE=1, contexts 128 and 1,024, new and
# previous defaults), and one experiment: the gate_up ring at 2 CTAs an SM with 3 stages each (alt/s2: one split
# fewer per SM, a deeper ring; MR_CTAS 2, MR_DEPTH 3) against 3 CTAs x 2 stages, timed alone and in bench/decode.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; S2=/tmp/B/alt/s2/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 60 /tmp/B/alt/s2/tests/gpu/gptoss_kernels --moe-decode-timing > $O/moe-decode-s2.txt 2>&1; echo "s2 moe-decode rc=$? ${SECONDS}s"
grep -E "^(FAIL|[0-9]+ checks)|timing gate_up_decode, (dp4a|tensor-core) ring" $O/moe-decode-s2.txt | cut -c1-160
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1
for r in 1 2; do
  timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 > $O/decode-main-r$r.txt 2>&1; echo "decode main run $r rc=$?"; grep -E "^ +[0-9]+ " $O/decode-main-r$r.txt
  timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024 --engine $S2 > $O/decode-s2-r$r.txt 2>&1; echo "decode s2 run $r rc=$?"; grep -E "^ +[0-9]+ " $O/decode-s2-r$r.txt
done
LLMR_GPTOSS_PROFILE=1 timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024 > $O/profile.txt 2>&1; echo "profile rc=$? ${SECONDS}s"
grep -A16 "gptoss_cuda profile" $O/profile.txt | grep -E "us " | head -16
LLMR_GPTOSS_PROFILE=1 LLMR_GPTOSS_MOE_DP4A=1 LLMR_GPTOSS_ROUTE_RING=1 timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024 > $O/profile-old.txt 2>&1; echo "profile old rc=$? ${SECONDS}s"
grep -A16 "gptoss_cuda profile" $O/profile-old.txt | grep -E "us " | head -16
echo "total ${SECONDS}s"
