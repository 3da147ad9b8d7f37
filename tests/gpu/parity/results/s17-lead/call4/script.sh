#!/bin/bash
# session 17 call 4: where the ring gate_up's 18.5 us go (its copies alone, its arithmetic alone: --moe-decode-timing
# slots 12 / 13), and the default engine's per-kernel decode profile (LLMR_GPTOSS_PROFILE=1, no graph) at context 128.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 90 $B/tests/gpu/gptoss_kernels --moe-decode-timing > $O/kernels-moe.txt 2>&1; echo "kernels-moe rc=$? ${SECONDS}s"
grep -E "^FAIL|checks|timing (gate_up|down)" $O/kernels-moe.txt | cut -c1-200
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
LLMR_GPTOSS_PROFILE=1 timeout 100 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128 > $O/profile.txt 2>&1; echo "profile rc=$?"
grep -A20 "gptoss_cuda profile" $O/profile.txt
echo "total ${SECONDS}s"
