#!/bin/bash
# session 30 call 6: the experts' tiled copy (gptoss_mxfp4_tile, LLMR_GPTOSS_MOE_TILED=1, build alt/tile): the batched
# step's pre-staged expert launches read each warp's super-chunk as 1 KB in one piece (call 5: loads alone 2.1 ->
# 3.0 TB/s). The tensor-core expert checks (the tiled launches bit for bit among the F16 forms) and timings;
# bench/throughput 64 streams main / tiled A B A B; the full gate with the tiled copy on.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; A=/tmp/B/alt
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
timeout 150 $A/tile/tests/gpu/gptoss_kernels --moe-mma-checks > $O/moe-mma-checks.txt 2>&1; echo "moe-mma-checks rc=$? ${SECONDS}s"
grep -E "^FAIL|checks, |pre-staged rows" $O/moe-mma-checks.txt | cut -c1-220
grep -oE "time experts T=(16|32|64|128) |F16 pre-staged [^;]*" $O/moe-mma-checks.txt | head -30
[ -d /tmp/m20b ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel ${SECONDS}s"
for r in 1 2; do for v in main tile; do
  E=$B/engines/gptoss_cuda/libgptoss_cuda.so; R=0
  if [ $v = tile ]; then E=$A/tile/engines/gptoss_cuda/libgptoss_cuda.so; R=1; fi
  LLMR_GPTOSS_MOE_TILED=$R timeout 60 $B/bench/throughput --model /tmp/m20b --engine $E --streams 64 > /tmp/t.txt 2>&1; echo "throughput $v run $r rc=$? ${SECONDS}s"
  grep -E "^ +[0-9]+ |streams, wall|step|tiled|VRAM" /tmp/t.txt | cut -c1-300; cat /tmp/t.txt >> $O/tp-$v.txt
done; done
rm -rf /tmp/BA; cp -r $B /tmp/BA; rm -rf /tmp/BA/engines; cp -r $A/tile/engines /tmp/BA/engines; cp $A/tile/tests/gpu/gptoss_kernels /tmp/BA/tests/gpu/gptoss_kernels
LLMR_GPTOSS_MOE_TILED=1 timeout 420 tests/gpu/gate.sh --build /tmp/BA --out /tmp/g --full > $O/gate.txt 2>&1; echo "gate rc=$? ${SECONDS}s"
grep -E "^GATE" $O/gate.txt; grep -hE "^FAIL" /tmp/g/gate/*.txt 2>/dev/null | cut -c1-250 | head -10
tar -C /tmp/g -czf $O/gate-logs.tgz gate 2>/dev/null
echo "total ${SECONDS}s"
