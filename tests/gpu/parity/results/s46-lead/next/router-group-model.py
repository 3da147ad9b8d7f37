#!/usr/bin/env python3
"""A host model of router-group-match.diff (session 46, prepared): the batched router's last block ranks each pair
among its expert's pairs by __match_any_sync within a warp plus the warps' counts before it, and sums the experts'
groups and pair offsets by a warp scan, instead of a thread per pair counting the pairs before it and one thread
summing over the experts. Checks that both give the same tables (groups, counts, offsets, pair_token, pair_of) for
random ids, E from 4 to 256 and T from 1 to 64, with and without heavy collisions. Prints "ok N"."""
import random
MD_G=4
def old(ids,E,T):
    P=T*4; GM=P
    cnt=[0]*E
    for e in ids: cnt[e]+=1
    gbase=[0]*E; poff=[0]*E; g=0; off=0
    for e in range(E):
        gbase[e]=g; g+=(cnt[e]+MD_G-1)//MD_G; poff[e]=off; off+=cnt[e]
    groups={0:g}; pt={}; po={}
    for p in range(P):
        e=ids[p]; rank=sum(1 for q in range(p) if ids[q]==e)
        gg=gbase[e]+rank//MD_G; slot=rank%MD_G
        groups[1+2*GM+4*gg+slot]=p
        if slot==0: groups[1+gg]=e; groups[1+GM+gg]=min(MD_G,cnt[e]-rank)
        pt[poff[e]+rank]=p//4; po[p]=poff[e]+rank
    return groups,cnt,poff,pt,po
def new(ids,E,T):
    P=T*4; GM=P; NW=(P+31)//32
    wcnt=[[0]*E for _ in range(NW)]
    rank=[0]*P
    for w in range(NW):
        lanes=[p for p in range(w*32,min(P,w*32+32))]
        for p in lanes:
            same=[q for q in lanes if ids[q]==ids[p]]
            rank[p]=sum(1 for q in same if q<p)
            if rank[p]==0: wcnt[w][ids[p]]=len(same)
    cnt=[sum(wcnt[w][e] for w in range(NW)) for e in range(E)]
    EPL=(E+31)//32
    ngs=[];nps=[]
    for l in range(32):
        r=range(l*EPL,min(E,l*EPL+EPL))
        ngs.append(sum((cnt[e]+MD_G-1)//MD_G for e in r)); nps.append(sum(cnt[e] for e in r))
    gbase=[0]*E; poff=[0]*E
    for l in range(32):
        g=sum(ngs[:l]); off=sum(nps[:l])
        for e in range(l*EPL,min(E,l*EPL+EPL)):
            gbase[e]=g; g+=(cnt[e]+MD_G-1)//MD_G; poff[e]=off; off+=cnt[e]
    groups={0:sum(ngs)}; pt={}; po={}
    for p in range(P):
        e=ids[p]; rk=rank[p]+sum(wcnt[w][e] for w in range(p//32))
        gg=gbase[e]+rk//MD_G; slot=rk%MD_G
        groups[1+2*GM+4*gg+slot]=p
        if slot==0: groups[1+gg]=e; groups[1+GM+gg]=min(MD_G,cnt[e]-rk)
        pt[poff[e]+rk]=p//4; po[p]=poff[e]+rk
    return groups,cnt,poff,pt,po
random.seed(1)
n=0
for it in range(3000):
    E=random.choice([4,5,31,32,33,64,128,255,256]); T=random.randint(1,64)
    ids=[]
    for t in range(T):
        k=min(4,E); ids+=random.sample(range(E),4) if E>=4 else None
    if random.random()<0.3: ids=[random.randrange(min(E,3)) for _ in ids]  # heavy collisions
    assert old(ids,E,T)==new(ids,E,T),(E,T)
    n+=1
print("ok",n)
