#!/bin/bash
# session 41 call 5: the batched router's latency (moe_decode.cu: part sums loaded before the first store, the router
# rows prefetched into L2 by slices, the E = 32 top-4 by reduction, only warp 0 fences) against 6d0e91b ("base"):
# bench/throughput at 8 and 64 streams A B B A with the per-part profile, ncu durations of the router at 8 streams,
# then the full gate and beside it selftest parity batching without the cache.
O=$OUT; rm -rf /tmp/B; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
[ -f /tmp/m20b/config.json ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
EB=/tmp/B/alt/base/engines/gptoss_cuda/libgptoss_cuda.so; EN=$B/engines/gptoss_cuda/libgptoss_cuda.so
for v in new base base new; do
  E=$EN; [ $v = base ] && E=$EB
  LLMR_GPTOSS_BATCH_PROFILE=1 timeout 60 $B/bench/throughput --engine $E --model /tmp/m20b --streams 8,64 > /tmp/tp.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(grep -E '^ +(8|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')$(awk 'NF == 11 && $3 ~ /\./ && $2 >= 20 {printf "| %s: %s ms MoE %s ", $1, $4, $10}' /tmp/tp.txt)"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput-ab.txt
done
for v in new base; do
  E=$EN; [ $v = base ] && E=$EB
  timeout 60 ncu --clock-control none -k regex:moe_router_decode_kernel --launch-skip 3000 -c 200 --csv --metrics gpu__time_duration.sum \
    $B/bench/throughput --engine $E --model /tmp/m20b --streams 8 > /tmp/rd-$v.csv 2>&1
  echo "ncu router $v rc=$? ${SECONDS}s: $(grep gpu__time_duration /tmp/rd-$v.csv | awk -F'","' '{gsub(/"/,"",$NF); gsub(/,/,"",$NF); s+=$NF; n++; u=$(NF-1)} END {printf "%d launches, mean %.3f %s", n, s/n, u}')"
  xz -c /tmp/rd-$v.csv > $O/ncu-router-dur-$v.csv.xz
done
LLMR_GPTOSS_EXPERT_CACHE=0 timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
G0=$!
timeout $((592 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels selftest parity batching serving" > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $G0; echo "gate without the cache rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-nocache.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
grep -h "router" /tmp/g/gate/kernels.txt 2>/dev/null | head -12 | cut -c1-160
mkdir -p $O/g; cp /tmp/g/gate/batching.txt $O/g/ 2>/dev/null; tail -3 /tmp/g/gate/batching20b.txt > $O/g/batching20b-tail.txt 2>/dev/null
echo "total ${SECONDS}s"
