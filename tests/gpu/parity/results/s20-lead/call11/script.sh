#!/bin/bash
# session 20 call 11: gptoss_qkv_rows with two row pairs per warp for 5-8 rows (LLMR_GPTOSS_QKV_ROWS_PP=2, the new
# default, against 1): all kernel checks (every row bit for bit its one-token result), the qkv rows timings, then
# bench/throughput at 8 streams three times each, alternating, and ncu durations of the 8-row kernel in both forms.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
{ for v in 2 1 2 1 2 1; do
    echo "=== PP=$v"; LLMR_GPTOSS_QKV_ROWS_PP=$v timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8 2>&1 | grep -E "^ +8 +[0-9]+ |^ +(2-3|4-7|8-15) |WARN|rror"
done; } > $O/tp-ab.txt 2>&1; cat $O/tp-ab.txt; echo "tp ${SECONDS}s"
for v in 2 1; do
  LLMR_GPTOSS_QKV_ROWS_PP=$v timeout 200 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv -k "regex:qkv_rows_kernel" --launch-skip 2000 --launch-count 200 \
    $B/bench/throughput --model /tmp/m20b --streams 8 > $O/ncu-pp$v.csv 2>/dev/null
  python3 -c "
import csv,collections,sys
rows=[r for r in csv.reader(open('$O/ncu-pp$v.csv')) if len(r)>10]
h=rows[0]; n=h.index('Kernel Name'); v=h.index('Metric Value'); d=collections.defaultdict(list)
for r in rows[1:]:
    try: d[r[n].split('(')[0]].append(float(r[v].replace(',','')))
    except ValueError: pass
for k,x in d.items(): print('PP=$v', k, len(x), 'avg %.2f us'%(sum(x)/len(x)/1e3))
"
done
timeout 240 $B/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"
grep -E "FAIL|checks, |qkv prologue of|qkv rows.*n=8" $O/kernels.txt | head -12
echo "total ${SECONDS}s"
