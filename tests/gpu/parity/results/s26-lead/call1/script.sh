#!/bin/bash
# session 26 call 1: PDL mode 2 (the early launch without L2 prefetches, route ring kept) against the default and
# mode 1, bench/decode A B C A B C; the kernel checks (the PDL chain in modes 1 and 2 bit for bit, the router_add{}
# mend); gptoss_batching on the 20b (session 25's test refactors, c6731c4 / eacc5d5, never run on a GPU).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2; do for p in 0 2 1; do
  echo "=== PDL=$p run $r"; LLMR_GPTOSS_PDL=$p timeout 60 $B/bench/decode --model /tmp/m20b --contexts 128,1024,4096 2>&1 | grep -E "^ +[0-9]+ "
done; done; echo "bench ${SECONDS}s"
timeout 200 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"; tail -1 $O/kernels.txt
grep -E "^FAIL|PDL" $O/kernels.txt | cut -c1-250 | head
timeout 120 $B/tests/gpu/gptoss_batching --model /tmp/m20b > $O/batching20b.txt 2>&1; echo "batching20b rc=$? ${SECONDS}s"; tail -2 $O/batching20b.txt
xz -9 $O/kernels.txt $O/batching20b.txt
echo "total ${SECONDS}s"
