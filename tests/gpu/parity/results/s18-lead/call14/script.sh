#!/bin/bash
# session 18 call 14: the final main engine; bench/decode LLMR_GPTOSS_ROUTE_RING=0 vs default (step 20's second form)
# three times, on whichever card comes (an H200 is wanted: the first form gained 1.8-2.7% there).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2 3; do
  echo "=== LLMR_GPTOSS_ROUTE_RING=0"; LLMR_GPTOSS_ROUTE_RING=0 timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
  echo "=== default (route ring)"; timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ |WARN|rror"
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
rm -rf /tmp/m20b
echo "total ${SECONDS}s"
