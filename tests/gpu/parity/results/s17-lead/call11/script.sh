#!/bin/bash
# session 17 call 11: the final engine (cde2d10): its per-kernel decode profile (LLMR_GPTOSS_PROFILE=1, no graph) at
# context 128 and bench/decode at contexts 128 / 1,024 / 4,096, for the standing figures.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
LLMR_GPTOSS_PROFILE=1 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128 > $O/profile.txt 2>&1; echo "profile rc=$?"
grep -A18 "gptoss_cuda profile" $O/profile.txt
timeout 200 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024,4096 > $O/decode.txt 2>&1; echo "decode rc=$?"
grep -E "^ +[0-9]+ |VRAM|context" $O/decode.txt
echo "total ${SECONDS}s"
