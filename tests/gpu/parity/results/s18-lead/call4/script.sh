#!/bin/bash
# session 18 call 4: main + the per-device SM-count cache (gptoss_sm_count). Per-kernel durations of batch-1 decode at
# boost clocks with warm caches (ncu --clock-control none --cache-control none), route ring off (default) and on, to
# see how much of a token is kernels and how much the gaps between them; bench/decode and bench/throughput standing;
# then the full gate (parity on tiny + small + 20b-2l with the route ring off, the default).
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$?"
timeout 100 $B/bench/decode --model /tmp/m20b --contexts 128,1024,4096 > $O/decode.txt 2>&1; grep -E "^ +[0-9]+ |copy|GB/s" $O/decode.txt | head -8
for rr in 0 1; do
  LLMR_GPTOSS_ROUTE_RING=$rr timeout 150 ncu --clock-control none --cache-control none --csv --metrics gpu__time_duration.sum \
    --launch-skip 300 --launch-count 400 $B/bench/decode --model /tmp/m20b --contexts 128 --tokens 16 > $O/ncu-rr$rr.csv 2>&1
  echo "ncu rr=$rr rc=$? ${SECONDS}s"
done
timeout 150 $B/bench/throughput --model /tmp/m20b --streams 1,8,64 > $O/tp.txt 2>&1; echo "tp rc=$? ${SECONDS}s"; grep -E "^ +(1|8|64) +[0-9]+ +[0-9]+ " $O/tp.txt
rm -rf /tmp/m20b
echo "before gate ${SECONDS}s"
timeout 400 tests/gpu/gate.sh --build $B --out /tmp/g --full 2>&1 | tee $O/gate.txt
for f in kernels parity batching20b serving serving20b; do cp /tmp/g/gate/$f.txt $O/ 2>/dev/null; done
grep -E "^FAIL" $O/kernels.txt | cut -c1-200 | head -4
grep -E "^[a-z0-9-]+/seed" $O/parity.txt | head -12
echo "total ${SECONDS}s"
