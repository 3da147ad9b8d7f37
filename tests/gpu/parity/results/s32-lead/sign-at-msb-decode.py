# Session 32: host check of a 12-instruction F16 decode for a tiled word whose sign bits sit at byte msb positions
# (weights 0-3: sign at bit 8k + 7; weights 4-7: at bit 8(k - 4) + 3; magnitudes in the nibbles low 3 bits), against
# the e2m1 values; prmt emulated as in mxfp4_lut.h. Run: python3 sign-at-msb-decode.py
import random, struct
def prmt(a,b,sel):
    by=[(a>>(8*i))&255 for i in range(4)]+[(b>>(8*i))&255 for i in range(4)]
    d=0
    for i in range(4):
        n=(sel>>(4*i))&15; v=by[n&7]
        if n&8: v=255 if v&128 else 0
        d|=v<<(8*i)
    return d
T0,T1=0x3E3C3800,0x46444240
E2M1=[0,0.5,1,1.5,2,3,4,6]
def f16(h):
    return struct.unpack('<e',struct.pack('<H',h))[0]
# layout: field k (bits 4k..4k+2) = magnitude of weight k; sign of weight k (k<4) at bit 8k+7; of weight k>=4 at bit 8(k-4)+3
def encode(ws):  # ws: list of 8 (sign, mag)
    w=0
    for k,(s,m) in enumerate(ws):
        w|=m<<(4*k)
        pos= 8*k+7 if k<4 else 8*(k-4)+3
        w|=s<<pos
    return w
def decode(w):
    hs=w>>16; i0=w&0x7777; i1=hs&0x7777
    m0=prmt(T0,T1,i0); m1=prmt(T0,T1,i1)
    b0=m0|(w&0x80808080); b1=m1|(((w<<4)&0xffffffff)&0x80808080)
    h=[prmt(b0,0,0x1404),prmt(b0,0,0x3424),prmt(b1,0,0x1404),prmt(b1,0,0x3424)]
    out=[]
    for x in h: out+= [f16(x&0xffff), f16(x>>16)]
    return out
for _ in range(200000):
    ws=[(random.randint(0,1),random.randint(0,7)) for _ in range(8)]
    got=decode(encode(ws))
    exp=[(-1 if s else 1)*E2M1[m] for s,m in ws]
    assert got==exp,(ws,got,exp)
print("12-instruction decode of the sign-at-msb layout: ok")
