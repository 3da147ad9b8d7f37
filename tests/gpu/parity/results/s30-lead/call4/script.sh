#!/bin/bash
# session 30 call 4: the batched experts' weights through a shared-memory ring (mode 4 of the streaming kernel,
# LLMR_GPTOSS_MOE_RING=1, build alt/ring): 1 CTA of 16 warps an SM, each lane's next 8 super-chunks in flight by
# cp.async (8 KB a warp) instead of 2 in registers (mode 2, 2 CTAs an SM). Call 3 found the 64-row step 11.05 -> 9.65 ms
# with the experts' arithmetic removed, i.e. their loads, not their arithmetic, bound most of the MoE block.
# The tensor-core expert checks (mode 4 among the F16 forms, bit for bit) and their timings; bench/throughput 64
# streams main / ring A B A B; the gate's batching step with the ring on.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; A=/tmp/B/alt
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 150 $A/ring/tests/gpu/gptoss_kernels --moe-mma-checks > $O/moe-mma-checks.txt 2>&1; echo "moe-mma-checks rc=$? ${SECONDS}s"
grep -E "^FAIL|checks, |pre-staged rows" $O/moe-mma-checks.txt | cut -c1-220
grep -oE "T=(16|64|128) .{0,40}|F16 pre-staged[^;]*" $O/moe-mma-checks.txt | head -30
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2; do for v in main ring; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; R=0
  if [ $v = ring ]; then E=$A/ring/engines/gptoss_cuda/libgptoss_cuda.so; R=1; fi
  LLMR_GPTOSS_MOE_RING=$R timeout 60 $B/bench/throughput --model /tmp/m20b --engine $E --streams 64 > /tmp/t.txt 2>&1; echo "throughput $v run $r rc=$? ${SECONDS}s"
  grep -E "^ +[0-9]+ |streams, wall|step" /tmp/t.txt | cut -c1-300; cat /tmp/t.txt >> $O/tp-$v.txt
done; done
rm -rf /tmp/BA; cp -r $B /tmp/BA; rm -rf /tmp/BA/engines; cp -r $A/ring/engines /tmp/BA/engines
LLMR_GPTOSS_MOE_RING=1 timeout 200 tests/gpu/gate.sh --build /tmp/BA --out /tmp/g --full --steps "batching" > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-250 | head -10
echo "total ${SECONDS}s"
