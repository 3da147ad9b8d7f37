#!/bin/bash
# session 41 call 4: the e5 mix branch removed (kernel checks + the full gate), the router's source-level ncu at 8 / 64 streams
O=$OUT; rm -rf /tmp/B; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
[ -f /tmp/m20b/config.json ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 200 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma-checks.txt 2>&1
echo "moe-mma-checks rc=$? $(tail -1 $O/mma-checks.txt) ${SECONDS}s"; grep -E "FAIL|e5m2 copy" $O/mma-checks.txt | head -4 | cut -c1-160
for s in 8 64; do
  timeout 90 ncu --set full --import-source no -k "regex:moe_router_decode_kernel" --launch-skip 3000 -c 1 -o /tmp/rep-r$s \
    $B/bench/throughput --model /tmp/m20b --streams $s > /tmp/ncu-r$s.log 2>&1
  echo "ncu router at $s streams rc=$? ${SECONDS}s"
  ncu -i /tmp/rep-r$s.ncu-rep --print-details all 2>&1 | xz -9 > $O/ncu-router-$s.txt.xz
  ncu -i /tmp/rep-r$s.ncu-rep --page source --print-source sass --csv 2>/dev/null | xz -9 > $O/source-router-$s.csv.xz
  xz -dc $O/ncu-router-$s.txt.xz | grep -E "Duration|Grid Size" | cut -c1-120 | sort -u
done
LLMR_GPTOSS_EXPERT_CACHE=0 timeout 380 tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
G0=$!
timeout 390 tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels selftest parity batching serving" > $O/gate.txt 2>&1 &
G1=$!
wait $G1; echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $G0; echo "gate without the cache rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-nocache.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
mkdir -p $O/g; cp /tmp/g/gate/batching20b.txt /tmp/g/gate/batching.txt $O/g/ 2>/dev/null
echo "total ${SECONDS}s"
