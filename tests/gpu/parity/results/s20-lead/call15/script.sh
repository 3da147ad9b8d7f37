#!/bin/bash
# session 20 call 15: gptoss_qkv_rows with its norm loading 4 elements of every row of x per pass, against 5b966ec
# (base) in the same call: ncu durations of qkv_rows_kernel<8> / <4> in bench/throughput at 8 streams (both builds),
# bench/throughput at 8 streams three times each (A B A B A B), then all kernel checks of the new build.
O=$OUT; mkdir -p /tmp/B /tmp/A /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && xz -dc .gpu-lead/pkg/base.tar.xz | tar -C /tmp/A -xf -
tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache; export LLMR_CACHE=/tmp/cache
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
/tmp/B/build/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
for v in A B; do D=/tmp/$v/build
  timeout 200 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv -k "regex:qkv_rows_kernel" --launch-skip 1000 --launch-count 300 \
    $D/bench/throughput --model /tmp/m20b --streams 8 > $O/ncu-$v.csv 2>/dev/null
  python3 -c "
import csv,collections
rows=[r for r in csv.reader(open('$O/ncu-$v.csv')) if len(r)>10]
h=rows[0]; n=h.index('Kernel Name'); v=h.index('Metric Value'); d=collections.defaultdict(list)
for r in rows[1:]:
    try: d[r[n].split('(')[0]].append(float(r[v].replace(',','')))
    except ValueError: pass
for k,x in sorted(d.items()): print('$v', k, len(x), 'avg %.2f us'%(sum(x)/len(x)/1e3))
"
done
{ for v in B A B A B A; do D=/tmp/$v/build
    echo "=== $v"; timeout 60 $D/bench/throughput --model /tmp/m20b --streams 8 2>&1 | grep -E "^ +8 +[0-9]+ |^ +(2-3|4-7|8-15) |WARN|rror"
done; } > $O/tp-ab.txt 2>&1; cat $O/tp-ab.txt; echo "tp ${SECONDS}s"
timeout 240 /tmp/B/build/tests/gpu/gptoss_kernels > $O/kernels.txt 2>&1; echo "kernels rc=$? ${SECONDS}s"
grep -E "FAIL|checks, |qkv prologue of|qkv rows.*n=8" $O/kernels.txt | head -12
echo "total ${SECONDS}s"
