#!/bin/bash
# Session 42 call 4 (~480 s of device time were left): the tiled MXFP4 loads keep the scale word whole until the
# super-chunk is used (mma_load_tiled / mma_tiled_scales), against main 492e29f (alt base). Call 3's ncu source page
# of the 8-row launches: the PRMT right after the scale load held 15% of the warp samples (gate_up 1,492 of 9,788,
# down 796 of 5,185): the warp waited for the load there. Predicted: the 8-row launches -8-12% (gate_up ~99.8 -> ~90
# us, down ~55 -> ~50), 8 streams' step rate +5-8%; the 16-31-row launches (pre-staged, the same loop) gain too.
O=$OUT; rm -rf /tmp/B; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
[ -f /tmp/m20b/config.json ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 60 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma-checks.txt 2>&1
echo "moe-mma-checks rc=$? $(grep -c '^ok' $O/mma-checks.txt) ok, $(grep -c FAIL $O/mma-checks.txt) FAIL ${SECONDS}s"
grep -E "time experts T=8 " $O/mma-checks.txt | cut -c1-200
timeout 60 $B/tests/gpu/gptoss_kernels --tc-checks > $O/tc-checks.txt 2>&1
echo "tc-checks rc=$? $(tail -1 $O/tc-checks.txt) ${SECONDS}s"
EB=/tmp/B/alt/base/engines/gptoss_cuda/libgptoss_cuda.so; EN=$B/engines/gptoss_cuda/libgptoss_cuda.so
for v in new base base new; do
  E=$EN; [ $v = base ] && E=$EB
  LLMR_GPTOSS_BATCH_PROFILE=1 timeout 60 $B/bench/throughput --engine $E --model /tmp/m20b --streams 8,16 > /tmp/tp.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(grep -E '^ +(8|16) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')$(awk 'NF == 11 && $3 ~ /\./ && $2 >= 20 {printf "| %s: %s ms MoE %s ", $1, $4, $10}' /tmp/tp.txt)"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput-ab.txt
done
timeout $((400 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels batching parity" > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
grep -h "FAIL" /tmp/g/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
