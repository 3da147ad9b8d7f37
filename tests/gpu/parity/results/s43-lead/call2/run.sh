#!/bin/bash
# Session 43 call 2. The T = 1 down kernel (moe_down_decode_kernel<1, 2, true, 90, true>) with a register budget of 3
# blocks per SM (DN_MINB) instead of 4: session 41's source page shows ptxas issuing a lane's 6 weight loads in three
# pairs, each next to its use, under the 64-register cap (three memory latencies a task, two tasks a warp); at 76
# registers the 360 blocks still fit at once (396 slots). Predicted: down -25-35% (in the graph ~12 -> ~8-9 us),
# batch-1 decode +2-5% at 128 and 1,024 keys. Then: the SASS of both engines (cuobjdump), the batch-1 kernels' ncu
# source pages (filtered by name: call 1's --launch-skip landed in the load's tiling kernels), and the gate.
O=$OUT; rm -rf /tmp/B; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
[ -f /tmp/m20b/config.json ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
EB=/tmp/B/alt/base/engines/gptoss_cuda/libgptoss_cuda.so; EN=$B/engines/gptoss_cuda/libgptoss_cuda.so
for v in new base base new; do
  E=$EN; [ $v = base ] && E=$EB
  timeout 60 $B/bench/decode --engine $E --model /tmp/m20b --contexts 128,1024 --tokens 128 > /tmp/d.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(awk '$1 ~ /^(128|1024)$/ {printf "%s: %s tok/s (%s) ", $1, $3, $NF}' /tmp/d.txt)"
  { echo "== $v"; cat /tmp/d.txt; } >> $O/decode-ab.txt
done
for v in new base; do
  E=$EN; [ $v = base ] && E=$EB
  timeout 60 ncu --clock-control none --cache-control none -k regex:moe_down_decode --launch-skip 100 -c 48 --csv \
    --metrics gpu__time_duration.sum $B/bench/decode --engine $E --model /tmp/m20b --contexts 128 --tokens 16 > /tmp/n.csv 2>&1
  echo "ncu down $v rc=$? ${SECONDS}s: $(grep moe_down /tmp/n.csv | awk -F'","' '{u=$(NF-1); gsub(/[",]/,"",$NF); s+=$NF; n++} END {printf "%d launches, mean %.3f %s", n, s/n, u}')"
  { echo "== $v"; cat /tmp/n.csv; } | xz -9 > $O/ncu-down-$v.csv.xz
done
CUO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
$CUO -sass $EN 2>&1 | grep -v "^\s*/\*[0-9a-f]*\*/\s*$" > /tmp/sass-new.txt; echo "sass rc=$? $(wc -c < /tmp/sass-new.txt) bytes ${SECONDS}s"
$CUO -sass $EB 2>&1 | awk '/Function : .*moe_down_decode/,/\.\.\.\.\.\.\.\.\.\./' > /tmp/sass-base-down.txt
tar cf - -C /tmp sass-new.txt sass-base-down.txt | xz -T0 -6 > $O/sass.tar.xz; echo "sass xz $(wc -c < $O/sass.tar.xz) bytes ${SECONDS}s"
# the batch-1 decode kernels' source pages (one layer's set and more; lm_head is a gemv1 too)
timeout 120 ncu --set full --import-source no -k regex:"qkv_decode|attention_kernel|gemv1|moe_gate_up_ring|moe_down_decode|argmax" \
  --launch-skip 200 -c 14 -o /tmp/rep1 $B/bench/decode --engine $EN --model /tmp/m20b --contexts 128 --tokens 32 > /tmp/ncu1.log 2>&1
echo "ncu batch-1 rc=$? ${SECONDS}s"; tail -3 /tmp/ncu1.log
ncu -i /tmp/rep1.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $O/source-b1.csv.xz
ncu -i /tmp/rep1.ncu-rep --print-details all 2>&1 | xz -9 > $O/ncu-b1.txt.xz
LLMR_GPTOSS_EXPERT_CACHE=0 timeout $((560 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
G0=$!
timeout $((565 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels selftest parity batching" > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $G0; echo "gate without the cache rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-nocache.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
