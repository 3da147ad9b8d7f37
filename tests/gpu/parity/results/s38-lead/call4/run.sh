#!/bin/bash
# Session 38 call 4 (H200): f2fp-place.diff, the table decode's last step (four prmt placing two bytes each as a half2's
# high bytes) as four fp8 e5m2 -> f16x2 conversions, which call 3's pipes.cu put on their own pipe (F2FP, ~1 warp
# instruction an SM a clock, beside the ALU pipe's ~2). The same bits by construction (e5m2 is fp16's high byte).
# Predicted: the batched step's expert kernel (ALU-bound) 5-10% faster at T = 64 if ptxas needs no shift for the high
# halves, ~0-5% if it does; batch-1 (mxfp4_lut8 in the decode GEMVs) +-1%. Then every kernel check on it.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; A=/tmp/B/alt/f2fp; SECONDS=0
EA=$A/engines/gptoss_cuda/libgptoss_cuda.so; EB=$B/engines/gptoss_cuda/libgptoss_cuda.so
cuobjdump -sass $EA 2>/dev/null | grep -c "F2FP.F16.E5M2" ; cuobjdump -sass -fun mxfp4_mma_stream_kernel $EA 2>/dev/null | grep -o "F2FP[A-Z0-9._]*\|PRMT\|SHF[A-Z0-9._]*" | sort | uniq -c | head
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1 &
for v in main f2fp; do X=$B; [ $v = f2fp ] && X=$A
  timeout 60 $X/tests/gpu/gptoss_kernels --moe-timing 16 32 64 128 > $O/moe-timing-$v.txt 2>&1
  echo "$v: $(grep -o "time experts T=[0-9]*\|the same with the tiled weights[^;]*" $O/moe-timing-$v.txt | paste -sd' ')"
done
wait; echo "mkmodel ${SECONDS}s"
for r in 1 2; do for v in main f2fp; do E=$EB; [ $v = f2fp ] && E=$EA
  timeout 90 $B/bench/throughput --engine $E --model /tmp/m20b --streams 8,32,64 > /tmp/tp.txt 2>&1
  echo "$v $r rc=$? ${SECONDS}s: $(grep -E '^ +(8|32|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')"
  { echo "== $v $r"; cat /tmp/tp.txt; } >> $O/throughput.txt
  timeout 60 $B/bench/decode --engine $E --model /tmp/m20b --contexts 128,1024 --tokens 64 > /tmp/dc.txt 2>&1
  echo "  decode: $(grep -E '^ +(128|1024) ' /tmp/dc.txt | awk '{printf "%s %s | ", $1, $2}')"; { echo "== $v $r"; cat /tmp/dc.txt; } >> $O/decode.txt
  LLMR_GPTOSS_EXPERT_CACHE=0 timeout 60 $B/bench/prefill --engine $E --model /tmp/m20b --lengths 256,512,4096 --reps 3 > /tmp/pf.txt 2>&1
  echo "  prefill uncached: $(grep -E '^ +[0-9]+ ' /tmp/pf.txt | awk '{printf "%s %s | ", $1, $2}')"; { echo "== $v $r"; cat /tmp/pf.txt; } >> $O/prefill.txt
done; done
# the gate (every kernel check, the self-test, parity against transformers, batching) on a build with f2fp's engine and
# tests, only where it won at T = 64 in --moe-timing by 3% or more
t64() { grep -o "time experts T=64 .*" $1 | grep -o "the same with the tiled weights [0-9.]*" | awk '{print $NF}'; }
M64=$(t64 $O/moe-timing-main.txt); F64=$(t64 $O/moe-timing-f2fp.txt); echo "T=64 tiled pre-staged: main $M64 f2fp $F64"
if awk -v m=$M64 -v f=$F64 'BEGIN{exit !(f <= 0.97 * m)}'; then
  cp -a $B /tmp/BF && cp -a $A/engines/. /tmp/BF/engines/ && cp -a $A/tests/gpu/. /tmp/BF/tests/gpu/
  timeout 420 tests/gpu/gate.sh --build /tmp/BF --out /tmp/gf --steps "kernels selftest parity batching" > $O/gate-f2fp.txt 2>&1
  echo "gate on f2fp rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-f2fp.txt; grep -h FAIL /tmp/gf/gate/*.txt | head -5 | cut -c1-200
else
  timeout 200 $A/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma-checks-f2fp.txt 2>&1
  echo "no win: moe-mma-checks on f2fp rc=$? $(tail -1 $O/mma-checks-f2fp.txt) ${SECONDS}s"
fi
echo "total ${SECONDS}s"
