#!/bin/bash
# session 16 call 9: where the tensor-core T = 1 gate_up's arithmetic waits (tag s16-moe-tc1-experiment-b, mode 11:
# no weight loads, 14.0 us): ncu's per-instruction stall samples of gate_up<8, TC1_VA | TC1_COMPUTE_ONLY>, summed
# by opcode and by stall reason.
O=$OUT; xz -dc .gpu-lead/pkg2/gk.xz > /tmp/gk && chmod +x /tmp/gk
nvidia-smi --query-gpu=name --format=csv,noheader; SECONDS=0
timeout 200 ncu --kernel-name-base mangled -k regex:_Z22moe_gate_up_tc1_kernelILi8ELi102E -c 1 --set full \
  --import-source no -o /tmp/r /tmp/gk --moe-decode-timing > $O/ncu-run.txt 2>&1; echo "ncu rc=$? ${SECONDS}s"
ncu -i /tmp/r.ncu-rep --page details > $O/details.txt 2>&1
grep -E "Duration|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Achieved Active Warps|Executed Ipc A|Registers Per" $O/details.txt
ncu -i /tmp/r.ncu-rep --page source --csv --print-source sass > /tmp/src.csv 2>&1; echo "src rc=$? lines $(wc -l < /tmp/src.csv)"
python3 - /tmp/src.csv > $O/stalls.txt <<'PY'
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
hdr = None
for i, r in enumerate(rows):
    if any('Source' == c for c in r) or any('Warp Stall Sampling (All Samples)' in c for c in r):
        hdr = i; break
if hdr is None:
    print("no header; first rows:"); [print(r[:8]) for r in rows[:5]]; sys.exit()
h = rows[hdr]; body = rows[hdr + 1:]
print("columns:", [c for c in h if 'stall' in c.lower() or c in ('Source', 'Warp Stall Sampling (All Samples)')][:40])
si = h.index('Source'); ws = [j for j, c in enumerate(h) if c.startswith('Warp Stall Sampling (All')][0]
byop = collections.Counter(); tot = 0
for r in body:
    if len(r) <= ws: continue
    try: v = float(r[ws] or 0)
    except ValueError: continue
    op = r[si].strip().split()[0] if r[si].strip() else '?'
    if op.startswith('@'): op = r[si].strip().split()[1]
    byop[op.split('.')[0]] += v; tot += v
print("total samples", tot)
for op, v in byop.most_common(15): print(f"{op:12s} {v:8.0f} {100*v/max(tot,1):5.1f}%")
reasons = [j for j, c in enumerate(h) if c.startswith('stall_') or c.startswith('smsp__pcsamp_warps_issue_stalled')]
agg = collections.Counter()
for r in body:
    for j in reasons:
        try: agg[h[j]] += float(r[j] or 0)
        except (ValueError, IndexError): pass
for k, v in agg.most_common(12): print(f"{k:60s} {v:8.0f}")
top = sorted(body, key=lambda r: -float(r[ws] or 0) if len(r) > ws and r[ws].replace('.','',1).isdigit() else 0)[:25]
for r in top: print(r[ws], r[si][:90])
PY
head -60 $O/stalls.txt
echo "total ${SECONDS}s"
