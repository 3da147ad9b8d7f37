#!/bin/bash
# session 21 call 4: step 38, the F16 form's 32-pair tiles (mode 1, from 1,024 pairs): its kernel checks (the same
# bits as 8- and 16-pair tiles), one 20b layer's experts at T = 256 / 512 / 1024 with 16- vs 32-pair tiles, and
# bench/prefill of 256-1,024 tokens: cuBLAS over the fp16 expert cache (default above 208 tokens) against the
# tensor-core kernel for all of them (LLMR_GPTOSS_MOE_MMA_PREFILL=4096) with 32-pair and with 16-pair tiles.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 200 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/moe-checks.txt 2>&1; echo "checks rc=$? ${SECONDS}s"
grep -E "checks, [0-9]+ failed|FAIL" $O/moe-checks.txt | head -5; grep -E "F16 T=512|same bits" $O/moe-checks.txt | head -6
timeout 120 $B/tests/gpu/gptoss_kernels --moe-timing 256 512 1024 > $O/moe-timing.txt 2>&1; echo "timing rc=$? ${SECONDS}s"
grep -oE "time experts T=[0-9]+|F16 occ1 tiles 2 [0-9.]+ / [0-9.]+ ms, tiles 4 [0-9.]+ / [0-9.]+ ms|auto bf16 p2 [^;]*" $O/moe-timing.txt
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
run() { n=$1; shift; env "$@" timeout 90 $B/bench/prefill --model /tmp/m20b --lengths 192,256,384,512,768,1024 > $O/prefill-$n.txt 2>&1
  echo "== $n ($*): rc=$? ${SECONDS}s"; grep -E "^ +[0-9]+ +[0-9.]+ " $O/prefill-$n.txt; }
run cublas A=1
run tiles4 LLMR_GPTOSS_MOE_MMA_PREFILL=4096
run tiles2 LLMR_GPTOSS_MOE_MMA_PREFILL=4096 LLMR_GPTOSS_MOE_STREAM_TILES=2
echo "total ${SECONDS}s"
