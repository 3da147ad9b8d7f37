#!/bin/bash
# session 26 call 6: step 55, the batch-1 attention's table entries and sink loaded with the position (one dependent
# round trip fewer). The kernel checks; bench/decode against the engine before (alt/old) A B A B A B at 128 / 1,024 and
# the no-graph profile's attention line; the gate's parity (compare summary.jsonl with call 4's default: bit-identical
# kernels give the same figures) and batching (tiny and 20b) steps.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; OLD=/tmp/B/alt/old/engines/gptoss_cuda/libgptoss_cuda.so
NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2 3; do for e in old new; do E=OLD; [ $e = new ] && E=NEW
  echo "=== $e run $r"; timeout 60 $B/bench/decode --model /tmp/m20b --engine ${!E} --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; done
for e in old new old new; do E=OLD; [ $e = new ] && E=NEW
  echo "=== profile $e"; LLMR_GPTOSS_PROFILE=1 timeout 60 $B/bench/decode --model /tmp/m20b --engine ${!E} --contexts 128 2>&1 | grep -iE "attention|o_proj|total"
done; echo "bench ${SECONDS}s"
timeout 200 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"; tail -1 $O/kernels.txt
grep -E "^FAIL|timing decode attention" $O/kernels.txt | cut -c1-200
timeout 200 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "parity batching" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; cp /tmp/g/gate/parity/summary.jsonl $O/summary.jsonl 2>/dev/null
xz -9 $O/kernels.txt; echo "total ${SECONDS}s"
