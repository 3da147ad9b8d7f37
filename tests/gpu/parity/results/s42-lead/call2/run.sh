#!/bin/bash
# Session 42 call 2. Four changes against main 9ad14c2 (alt base), each the same bits:
#  a) rows_norm_split: the norm's weights loaded with the row, before the stores (16 loads a thread behind the stores
#     of h before); predicted (ncu, warm caches) ~-40% on that kernel;
#  b) tc_reduce_segs: a thread's 4 columns loaded before its stores (4 round trips -> 1); predicted the lm_head reduce
#     at 64 rows ~80 -> ~50 us;
#  c) ms_store: the two bias values loaded once before the stores; ~-1% on the expert launches' epilogue;
#  d) ms_stage: token / unit walked instead of an integer division per unit; the 8-row MXFP4 launches -3-5%.
# Predicted step rates: 8 streams +3-4%, 64 streams +1-1.5%.
O=$OUT; rm -rf /tmp/B; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
[ -f /tmp/m20b/config.json ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 60 $B/tests/gpu/gptoss_kernels --batch-checks > $O/batch-checks.txt 2>&1
echo "batch-checks rc=$? $(tail -1 $O/batch-checks.txt) ${SECONDS}s"
timeout 120 $B/tests/gpu/gptoss_kernels --moe-mma-checks > $O/mma-checks.txt 2>&1
echo "moe-mma-checks rc=$? $(grep -c '^ok' $O/mma-checks.txt) ok, $(grep -c FAIL $O/mma-checks.txt) FAIL ${SECONDS}s"
EB=/tmp/B/alt/base/engines/gptoss_cuda/libgptoss_cuda.so; EN=$B/engines/gptoss_cuda/libgptoss_cuda.so
for s in 8 64; do for v in new base; do
  E=$EN; [ $v = base ] && E=$EB
  timeout 80 ncu --clock-control none --cache-control none -k regex:"rows_norm_split|tc_reduce_segs|mxfp4_mma_stream" --launch-skip 3000 -c 500 --csv \
    --metrics gpu__time_duration.sum $B/bench/throughput --engine $E --model /tmp/m20b --streams $s > /tmp/d-$v-$s.csv 2>&1
  echo "ncu $v $s streams rc=$? ${SECONDS}s"
  grep gpu__time_duration /tmp/d-$v-$s.csv | python3 -c "
import sys,csv,collections
d=collections.defaultdict(list)
for r in csv.reader(sys.stdin):
    d[(r[4].split('(')[0][:60], r[8])].append(float(r[-1].replace(',','')))
for k,v in sorted(d.items()): print('   %-60s %-14s n=%4d mean %8.2f us' % (k[0], k[1], len(v), sum(v)/len(v)/1000))
"
  xz -c /tmp/d-$v-$s.csv > $O/ncu-$v-$s.csv.xz
done; done
for v in new base base new; do
  E=$EN; [ $v = base ] && E=$EB
  LLMR_GPTOSS_BATCH_PROFILE=1 timeout 60 $B/bench/throughput --engine $E --model /tmp/m20b --streams 8,64 > /tmp/tp.txt 2>&1
  echo "$v rc=$? ${SECONDS}s: $(grep -E '^ +(8|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')$(awk 'NF == 11 && $3 ~ /\./ && $2 >= 20 {printf "| %s: %s ms MoE %s ", $1, $4, $10}' /tmp/tp.txt)"
  { echo "== $v"; cat /tmp/tp.txt; } >> $O/throughput-ab.txt
done
LLMR_GPTOSS_EXPERT_CACHE=0 timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
G0=$!
timeout $((592 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "kernels selftest parity batching serving" > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $G0; echo "gate without the cache rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-nocache.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
echo "total ${SECONDS}s"
