#!/bin/bash
# session 15 call 5: (1) the batching check's near-tie replays on a fp32-level debug forward
# (LLMR_GPTOSS_DEBUG_PRECISE, set by gptoss_batching): the 20b check twice with every default path;
# (2) the T = 1 down kernel with 4 rows per block (LLMR_GPTOSS_MOE_DOWN_ROWS=4): gate, bench/decode old
# (a6542b7) vs new default vs new with 4 rows, twice; profile.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && xz -dc .gpu-lead/pkg/old.so.xz > /tmp/old.so && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; OLD=/tmp/old.so; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --steps "kernels selftest parity batching" 2>&1 | tee $O/gate.txt
for f in kernels parity; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
grep -E "^FAIL|4 rows per block|4 rows/block" $O/kernels.txt | cut -c1-200; grep -E "timing (gate_up_decode|down_decode|MoE block fused \(3)" $O/kernels.txt | grep "T=1:"
echo "gate ${SECONDS}s"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
for i in 1 2; do timeout 200 $B/tests/gpu/gptoss_batching --model /tmp/m20b > /tmp/b20-$i.txt 2>&1; echo "b20 run $i rc=$?"; grep -E "checks|^FAIL|request 6" /tmp/b20-$i.txt | cut -c1-300; done
cat /tmp/b20-1.txt /tmp/b20-2.txt > $O/b20.txt
{ for i in 1 2; do
  echo "=== old (a6542b7)"; $B/bench/decode --model /tmp/m20b --engine $OLD --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== new, down 8 rows/block"; $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== new, down 4 rows/block"; LLMR_GPTOSS_MOE_DOWN_ROWS=4 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
LLMR_GPTOSS_MOE_DOWN_ROWS=4 LLMR_GPTOSS_PROFILE=1 $B/bench/decode --model /tmp/m20b --contexts 128 > $O/decode-prof.txt 2>&1; grep -E "us " $O/decode-prof.txt
echo "total ${SECONDS}s"
