# hybrid_decode.py (session 40): an exact host emulation of the proposed hybrid MXFP4 word layout and its decode
# (docs/performance.md, "What is next (session 40)", item 1): the 8 nibbles of a tiled word moved to fixed bit
# positions (POS: code bits start, sign bit) so that pairs (0,1) and (2,3) decode as a mask of the word and of the
# word << 8 (e2m1 at fp16 bits 9-11 and 15: the value times 2^-14, then times 2^(14 + k)), and pairs (4,5) and (6,7)
# as one prmt each in the scaled tables with spread selectors (nibbles 0 and 2 of the selector 8: sign-replicate of
# the table's zero byte, 0x00) plus one LOP3 for both signs. Checks 200,000 random words and scales against e2m1 x 2^k,
# signed zeros included. The products here are exact float64; on the GPU 2^(14 + k) is an fp16 only for k <= 1, so
# k in 2..13 takes two HMUL2 (x 2^14, then x 2^k), each exact. Run: python3 hybrid_decode.py (no numpy needed).
import random, struct
import math
E2M1=[0,0.5,1,1.5,2,3,4,6]
def f16(bits): return struct.unpack('<e', struct.pack('<H', bits))[0]
def prmt(a,b,sel):
    d=0
    for i in range(4):
        n=(sel>>(4*i))&15
        v=((b if n&4 else a)>>(8*(n&3)))&0xFF
        if n&8: v=0xFF if v&0x80 else 0
        d|=v<<(8*i)
    return d
def tables(k):
    T0=(0x3E3C3800 + k*0x04040400)&0xFFFFFFFF; T1=(0x46444240 + k*0x04040404)&0xFFFFFFFF; return T0,T1
# layout: nibble i of std word -> (code bits positions start, sign position)
POS=[(9,15),(25,31),(1,7),(17,23),(4,0),(12,16),(20,8),(28,24)]
def pack(w):
    v=0
    for i,(c,s) in enumerate(POS):
        n=(w>>(4*i))&15
        v|=(n&7)<<c
        v|=((n>>3)&1)<<s
    return v
def hmul(bits,scale):
    lo=f16(bits&0xFFFF)*scale; hi=f16(bits>>16)*scale
    return lo,hi
def decode(v,k):
    T0,T1=tables(k); M=0xFFFFFFFF
    out=[]
    out.append(hmul(v&0x8E008E00, 2.0**14*2.0**k))
    out.append(hmul(((v<<8)&M)&0x8E008E00, 2.0**14*2.0**k))
    for vv,sh in ((v,15),(v>>16,7)):
        sel=((vv&0x7070)|0x0808)&0xFFFF
        h=prmt(T0,T1,sel)|(((v<<sh)&M)&0x80008000)
        out.append((f16(h&0xFFFF),f16(h>>16)))
    return out
bad=0
for t in range(200000):
    w=random.getrandbits(32); k=random.randint(-13,13)
    got=decode(pack(w),k)
    want=[]
    for i in range(4):
        vals=[]
        for j in (2*i,2*i+1):
            n=(w>>(4*j))&15; x=E2M1[n&7]*2.0**k; vals.append(-x if n&8 else x)
        want.append(tuple(vals))
    for g,wv in zip(got,want):
        for a,b in zip(g,wv):
            if not (a==b and math.copysign(1,a)==math.copysign(1,b)): bad+=1
print("mismatches", bad)
# bits used exactly once
used=[]
for c,s in POS: used+= [c,c+1,c+2,s]
print(sorted(used)==list(range(32)))
