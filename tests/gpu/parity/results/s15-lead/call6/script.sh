#!/bin/bash
# session 15 call 6: (1) gptoss_batching's first near-tie replay on the fp32-level debug forward too; the 20b
# check twice; (2) the T = 1 MXFP4 kernels prefetching each warp's next task into L2 (LLMR_GPTOSS_MOE_PREFETCH=1):
# gate, bench/decode old (a6542b7) vs main vs prefetch, twice; profile.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && xz -dc .gpu-lead/pkg/old.so.xz > /tmp/old.so && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; OLD=/tmp/old.so; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --steps "kernels selftest parity batching" 2>&1 | tee $O/gate.txt
for f in kernels parity batching; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
grep -E "^FAIL|prefetch" $O/kernels.txt | cut -c1-200; grep -E "timing (gate_up_decode|down_decode)" $O/kernels.txt | grep "T=1:"
grep -E "near-tie|^FAIL" $O/batching.txt | cut -c1-250 | head -8
echo "gate ${SECONDS}s"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
for i in 1 2; do timeout 200 $B/tests/gpu/gptoss_batching --model /tmp/m20b > /tmp/b20-$i.txt 2>&1; echo "b20 run $i rc=$?"; grep -E "checks|^FAIL|near-tie" /tmp/b20-$i.txt | cut -c1-400; done
cat /tmp/b20-1.txt /tmp/b20-2.txt > $O/b20.txt
{ for i in 1 2; do
  echo "=== old (a6542b7)"; $B/bench/decode --model /tmp/m20b --engine $OLD --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== main"; $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== prefetch"; LLMR_GPTOSS_MOE_PREFETCH=1 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
LLMR_GPTOSS_MOE_PREFETCH=1 LLMR_GPTOSS_PROFILE=1 $B/bench/decode --model /tmp/m20b --contexts 128 > $O/decode-prof.txt 2>&1; grep -E "MXFP4|router|o_proj" $O/decode-prof.txt
echo "total ${SECONDS}s"
