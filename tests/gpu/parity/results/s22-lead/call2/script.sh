#!/bin/bash
# session 22 call 2: step 42 (measured first, numbered after step 41), the pre-staged F16 experts in 16-pair tiles (LLMR_GPTOSS_MOE_PRE_TILES=2): kernel checks
# (the same bits as 8-pair tiles), one 20b layer's experts at T = 16..128 with and without, and 32 / 64 streams A B A B.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 200 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/moe-checks.txt 2>&1; echo "checks rc=$? ${SECONDS}s"
grep -E "checks, [0-9]+ failed|FAIL" $O/moe-checks.txt | head -5; grep -E "pre-staged rows" $O/moe-checks.txt | head -8
for v in 1 2 1 2; do
  LLMR_GPTOSS_MOE_PRE_TILES=$v timeout 60 $B/tests/gpu/gptoss_kernels --moe-timing 16 32 64 96 128 > $O/moe-timing-$v.txt 2>&1
  echo "== pre tiles $v: $(grep -oE 'time experts T=[0-9]+|F16 pre-staged [0-9.]+ / [0-9.]+ ms' $O/moe-timing-$v.txt | paste -sd' ')"
done
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for v in 1 2 1 2; do
  LLMR_GPTOSS_MOE_PRE_TILES=$v timeout 100 $B/bench/throughput --model /tmp/m20b --streams 32,64 > $O/tp-$v.txt 2>&1
  echo "== pre tiles $v rc=$? ${SECONDS}s"; grep -E "^ +(32|64) +[0-9]+ " $O/tp-$v.txt
done
echo "total ${SECONDS}s"
