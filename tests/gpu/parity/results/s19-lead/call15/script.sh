#!/bin/bash
# session 19 call 15: the final build's kernel checks (the test refactors since call 13: one YaRN table helper) and
# bench/decode / bench/throughput standing on whichever card comes.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 300 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"; grep -E "^FAIL|checks, " $O/kernels.txt | head -5
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024,4096 > $O/decode.txt 2>&1; grep -E "^ +[0-9]+ |copy" $O/decode.txt
timeout 200 $B/bench/throughput --model /tmp/m20b --streams 1,8,64 > $O/tp.txt 2>&1; echo "tp rc=$?"; grep -E "^ +(1|8|64) +[0-9]+ +[0-9]+ " $O/tp.txt
rm -rf /tmp/m20b
echo "total ${SECONDS}s"
