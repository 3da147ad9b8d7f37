#!/bin/bash
# session 15 call 9: the final engine (gate_up's task ranges rotated per group by default): the full gate (--full),
# bench/decode old (a6542b7) vs final twice, bench/throughput 1 / 8 / 64 streams.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && xz -dc .gpu-lead/pkg/old.so.xz > /tmp/old.so && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; OLD=/tmp/old.so; NEW=$B/engines/gptoss_cuda/libgptoss_cuda.so
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --full 2>&1 | tee $O/gate.txt
for f in kernels parity batching20b serving20b; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
grep -E "^FAIL|rotated" $O/kernels.txt | cut -c1-200 | head -4; grep -E "timing gate_up_decode" $O/kernels.txt | grep "T=1:"
echo "gate ${SECONDS}s"
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
{ for i in 1 2; do
  echo "=== old (a6542b7)"; $B/bench/decode --model /tmp/m20b --engine $OLD --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
  echo "=== final"; $B/bench/decode --model /tmp/m20b --engine $NEW --contexts 128,1024 2>&1 | grep -E "^ +[0-9]+ "
done; } > $O/decode-ab.txt 2>&1; cat $O/decode-ab.txt
timeout 150 $B/bench/throughput --model /tmp/m20b --streams 1,8,64 > $O/tp.txt 2>&1; echo "tp rc=$?"; grep -E "^ +(1|8|64) +[0-9]+ +[0-9]+ " $O/tp.txt
echo "total ${SECONDS}s"
