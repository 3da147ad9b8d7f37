#!/bin/bash
# session 15 call 2: the T = 1 weight ring in the MXFP4 expert GEMVs (docs/performance.md, issue 10 step 12).
# Gate on the new build; bench/decode old (main a6542b7) vs new ring 1 / ring 2 / no ring, twice; profile; 20b batching.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && xz -dc .gpu-lead/pkg/old.so.xz > /tmp/old.so && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; OLD=/tmp/old.so; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g 2>&1 | tee $O/gate.txt
for f in kernels selftest parity batching; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
grep -E "^FAIL|ring" $O/kernels.txt | cut -c1-200; grep -E "timing (router_decode|gate_up_decode|down_decode|MoE block)" $O/kernels.txt | grep "T=1:"
echo "gate+kernels ${SECONDS}s"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== old (a6542b7)"; $B/bench/decode --model /tmp/m20b --engine $OLD --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== new, ring 1"; $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== new, ring 2"; LLMR_GPTOSS_MOE_RING=2 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== new, no ring"; LLMR_GPTOSS_MOE_RING=0 $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
LLMR_GPTOSS_PROFILE=1 $B/bench/decode --model /tmp/m20b --contexts 128 > $O/decode-prof.txt 2>&1; grep -E "us " $O/decode-prof.txt
timeout 200 $B/tests/gpu/gptoss_batching --model /tmp/m20b > $O/b20.txt 2>&1; echo "b20 rc=$?"; grep -E "checks|^FAIL" $O/b20.txt | cut -c1-200 | sort | uniq -c
echo "total ${SECONDS}s"
