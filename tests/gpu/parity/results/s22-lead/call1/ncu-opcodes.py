import csv, collections, re, sys
# input: xz -dk ncu-f16-source.csv.xz (the per-instruction source page of the call's ncu report)
rows = list(csv.reader(open('ncu-f16-source.csv')))
# two kernels possibly: split by "Kernel Name" lines
blocks, cur = [], None
for r in rows:
    if r and r[0] == 'Kernel Name':
        cur = []; blocks.append(cur); continue
    if r and r[0] == 'Address': hdr = r; continue
    if cur is not None and r and r[0].startswith('0x'): cur.append(r)
print(len(blocks), [len(b) for b in blocks])
H = {h:i for i,h in enumerate(hdr)}
stalls = [h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
for bi, b in enumerate(blocks):
    ops = collections.Counter(); samp = collections.Counter(); st = collections.defaultdict(collections.Counter)
    tot = 0; totsamp = 0
    for r in b:
        src = r[H['Source']].strip()
        op = re.sub(r'^@!?U?P\w+\s+', '', src).split()[0] if src else '?'
        base = op.split('.')[0]
        n = int(r[H['Instructions Executed']] or 0)
        s = int(r[H['Warp Stall Sampling (All Samples)']] or 0)
        ops[base] += n; tot += n; samp[base] += s; totsamp += s
        for k in stalls: st[base][k] += int(r[H[k]] or 0)
    print(f"kernel {bi}: {tot/1e6:.2f}M warp-instr, {totsamp} samples")
    for op, n in ops.most_common(22):
        top = ', '.join(f"{k[6:]} {v*100/max(1,samp[op]):.0f}%" for k, v in st[op].most_common(4))
        print(f"  {op:8s} {n/1e6:7.2f}M {100*n/tot:5.1f}%  samples {100*samp[op]/totsamp:5.1f}%  [{top}]")
