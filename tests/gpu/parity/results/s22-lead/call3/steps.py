import csv, collections, re
# input: the call's ncu CSV (ncu-durations.csv, written by script.sh on the GPU machine; not kept here)
rows=list(csv.reader(open('ncu-durations.csv')))
hdr=None; data=[]
for r in rows:
    if r and r[0]=='ID': hdr=r; continue
    if hdr and len(r)==len(hdr):
        d=dict(zip(hdr,r)); data.append((re.sub(r'\(.*','',d['Kernel Name']).replace('void ','')[:48], d['Grid Size'], float(d['Metric Value'].replace(',',''))/1000.0))
print(len(data))
# steps: segment by the lm_head-ish: find 'sample' kernels? list distinct names
names=collections.Counter(n for n,g,t in data)
for n,c in names.most_common(60): print(f"{c:6d} {n}")
# decode steps: a step = from embed... find sequences: mark index of mxfp4_mma_stream (gate_up has grid x 23)
idx=[i for i,(n,g,t) in enumerate(data) if n.startswith('mxfp4_mma_stream') and g.startswith('(23,')]
print(len(idx), collections.Counter(data[i][1] for i in idx).most_common(10))
# find the first gate_up with y=62 and print names from 30 kernels before the first of its 24-run to after the last
sel=[i for i in idx if data[i][1]=='(23, 62, 1)']
a,b=sel[0],sel[-1]
print(a,b)
for i in range(a-25, a+20): print(i, data[i])
print('...')
for i in range(b, b+40): print(i, data[i])
# decode steps: from an embed_kernel whose next rmsnorm has the same grid (decode) to the next embed
emb=[i for i,(n,g,t) in enumerate(data) if n=='embed_kernel']
print('steps')
agg=collections.defaultdict(float); nsteps=0
for a,b in zip(emb, emb[1:]):
    g=data[a][1]; rows=int(g.strip('(').split(',')[0])
    # decode step has gate_up grid (23, y) with y<=64 and no prefill-size kernels
    seg=data[a:b]
    if rows<50 or rows>64: continue
    if any(n.startswith('attention_tc2') for n,_,_ in seg): continue
    # cut at the sampling: everything up to rows_count
    tot=sum(t for _,_,t in seg)
    nsteps+=1
    print(rows, len(seg), f"{tot/1000:.2f} ms")
    for n,gg,t in seg:
        k=n
        if n.startswith('nvjet'): k='cublas gemm'
        agg[k]+=t
print(nsteps)
T=sum(agg.values())
for k,v in sorted(agg.items(), key=lambda x:-x[1]): print(f"{k:50s} {v/nsteps/1000:7.3f} ms/step {100*v/T:5.1f}%")
