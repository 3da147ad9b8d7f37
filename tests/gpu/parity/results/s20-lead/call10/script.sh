#!/bin/bash
# session 20 call 10: where a small batched step's time goes, per kernel: ncu durations (boost clocks, caches as left)
# of 600 consecutive launches of bench/throughput at 8 streams after its warm-up and prefills (steps of 1-8 rows),
# summed by kernel name.
O=$OUT; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; SECONDS=0
$B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /dev/null 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
timeout 400 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --launch-skip 30000 --launch-count 1500 \
  $B/bench/throughput --model /tmp/m20b --streams 8 > $O/ncu.csv 2> $O/ncu.err; echo "ncu rc=$? ${SECONDS}s"
python3 - "$O/ncu.csv" <<'PY' > $O/by-kernel.txt
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; i_name = hdr.index("Kernel Name"); i_val = hdr.index("Metric Value")
tot = collections.Counter(); cnt = collections.Counter()
for r in rows[1:]:
    try: v = float(r[i_val].replace(",", ""))
    except ValueError: continue
    n = r[i_name].split("(")[0][:90]; tot[n] += v; cnt[n] += 1
T = sum(tot.values())
for n, v in tot.most_common(40): print(f"{v/1e3:10.1f} us {100*v/T:5.1f}%  n={cnt[n]:5d}  avg {v/cnt[n]/1e3:7.2f} us  {n}")
print(f"total {T/1e3:.1f} us over {sum(cnt.values())} launches")
PY
cat $O/by-kernel.txt; tail -3 $O/ncu.err; echo "total ${SECONDS}s"
