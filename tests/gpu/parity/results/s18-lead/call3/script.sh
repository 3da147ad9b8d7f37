#!/bin/bash
# session 18 call 3: (a) qkv_decode and gemv1 issue their warp's first weight chunks before the x staging / norm
# (issue 10 step 21, bit for bit): every kernel check, bench/decode old (route ring default, without step 21) vs
# new twice; (b) serving on the 20b (FULL=1) with the route ring on (default) and off, to see where call 2's
# "request 2: batched text differs from alone" comes from (serving.sh now prints where the texts part).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && xz -dc .gpu-lead/pkg/old.so.xz > /tmp/old.so && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; OLD=/tmp/old.so; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 120 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"
grep -E "^FAIL|checks|qkv|gemv1" $O/kernels.txt | cut -c1-200 | head -30
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== old"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $OLD --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== new (step 21)"; timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
rm -rf /tmp/m20b
echo "before serving ${SECONDS}s"
LLMR_BUILD=$B FULL=1 timeout 240 bash e2e/gpu/serving.sh > $O/serving20b-rr.txt 2>&1; echo "serving 20b route ring on: rc=$? ${SECONDS}s"
grep -E "PASS|FAIL|ok " $O/serving20b-rr.txt | cut -c1-400
LLMR_GPTOSS_ROUTE_RING=0 LLMR_BUILD=$B FULL=1 timeout 240 bash e2e/gpu/serving.sh > $O/serving20b-norr.txt 2>&1; echo "serving 20b route ring off: rc=$? ${SECONDS}s"
grep -E "PASS|FAIL|ok " $O/serving20b-norr.txt | cut -c1-400
echo "total ${SECONDS}s"
