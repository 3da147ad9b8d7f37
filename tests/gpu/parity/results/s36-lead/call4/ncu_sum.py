#!/usr/bin/env python3
"""Sums call 4's ncu CSV (one row per launch and metric) by kernel over the timed prompt: bench/prefill runs one
untimed prompt then the timed one, and the engine's warm-up was off, so the timed prompt starts at the last
embedding launch. Usage: ncu_sum.py out/ncu-cache0.csv.xz [...]"""
import collections, csv, lzma, re, sys

for path in sys.argv[1:]:
    launches = collections.OrderedDict()
    for r in csv.reader(lzma.open(path, 'rt')):
        d = launches.setdefault(int(r[0]), {'name': r[4]})
        d[r[12]] = float(r[14].replace(',', ''))
    L = list(launches.values())
    start = max(i for i, d in enumerate(L) if 'embed' in d['name'])
    seg = L[start:]
    agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for d in seg:
        a = agg[re.sub(r'\(.*', '', d['name'])[:70]]
        a[0] += 1
        a[1] += d.get('gpu__time_duration.sum', 0) / 1e6
        a[2] += (d.get('dram__bytes_read.sum', 0) + d.get('dram__bytes_write.sum', 0)) / 1e9
    print(f"== {path}: {len(L)} launches, the timed prompt from launch {start}: {len(seg)} launches, "
          f"{sum(a[1] for a in agg.values()):.2f} ms of kernels (ncu's clocks)")
    for name, (n, ms, gb) in sorted(agg.items(), key=lambda x: -x[1][1]):
        if ms >= 0.05:
            print(f"{ms:8.2f} ms {n:5d} x {gb:7.2f} GB {gb / ms * 1e3:7.0f} GB/s  {name}")
