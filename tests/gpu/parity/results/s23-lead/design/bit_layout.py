#!/usr/bin/env python3
"""Session 23, design only (docs/performance.md, Session 23 "What is next", item 2): checks on the CPU that the
proposed load-time layout of an MXFP4 word lets 6 LOP3s and 5 shifts produce the 4 fp16 pairs (n0, n1), (n2, n3),
(n4, n5), (n6, n7) of its 8 e2m1 nibbles, each value times 2^-14, for every nibble value in every position.

Nibble n (bits s e1 e0 m, as the checkpoint stores it, nibble i at bits 4i..4i+3) goes to:
  pair 0: n0 mag -> 9..11, sign -> 15;  n1 mag -> 25..27, sign -> 31      h0 = R & 0x8E008E00
  pair 1: n2 mag -> 6..8,  sign -> 12;  n3 mag -> 22..24, sign -> 28      h1 = (R << 3) & 0x8E008E00
  pair 2: n4 mag -> 0..2,  sign -> 13;  n5 mag -> 16..18, sign -> 29      h2 = ((R << 9) & 0x0E000E00) | ((R << 2) & 0x80008000)
  pair 3: n6 mag -> 3..5,  sign -> 14;  n7 mag -> 19..21, sign -> 30      h3 = ((R << 6) & 0x0E000E00) | ((R << 1) & 0x80008000)
Run: python3 bit_layout.py (prints the checks and exits 1 on a mismatch)."""
import random
import struct
import sys

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
MAG_AT = [9, 25, 6, 22, 0, 16, 3, 19]    # lowest bit of nibble i's 3 magnitude bits in R
SIGN_AT = [15, 31, 12, 28, 13, 29, 14, 30]
M32 = 0xFFFFFFFF


def encode(w):
    r = 0
    for i in range(8):
        n = (w >> (4 * i)) & 15
        r |= (n & 7) << MAG_AT[i]
        r |= (n >> 3) << SIGN_AT[i]
    return r


def decode(r):
    h0 = r & 0x8E008E00
    h1 = (r << 3) & M32 & 0x8E008E00
    t2 = (r << 2) & M32 & 0x80008000
    h2 = ((r << 9) & M32 & 0x0E000E00) | t2
    t3 = (r << 1) & M32 & 0x80008000
    h3 = ((r << 6) & M32 & 0x0E000E00) | t3
    return [h0, h1, h2, h3]  # 6 LOP3 (h0, h1, t2, h2, t3, h3), 5 shifts


def f16(bits):
    return struct.unpack('<e', struct.pack('<H', bits))[0]


def value(n):
    v = E2M1[n & 7]
    return -v if n & 8 else v


def check(w):
    h = decode(encode(w))
    for p in range(4):
        for half in range(2):
            n = (w >> (4 * (2 * p + half))) & 15
            got = f16((h[p] >> (16 * half)) & 0xFFFF) * 2.0 ** 14
            want = value(n)
            if got != want or (n == 8 and str(got) != '-0.0'):
                return f'word {w:08x}: nibble {2 * p + half} = {n}: got {got}, want {want}'
    return None


bits = sorted(MAG_AT[i] + k for i in range(8) for k in range(3)) + sorted(SIGN_AT)
ok = sorted(bits) == list(range(32))
print(f"{'ok  ' if ok else 'FAIL'} every bit of R holds one bit of one nibble")
bad = [check(n << (4 * i)) for i in range(8) for n in range(16)]
bad = [b for b in bad if b]
print(f"{'ok  ' if not bad else 'FAIL'} every nibble value in every position (128 words){': ' + bad[0] if bad else ''}")
random.seed(23)
bad = [b for b in (check(random.getrandbits(32)) for _ in range(200000)) if b]
print(f"{'ok  ' if not bad else 'FAIL'} 200,000 random words{': ' + bad[0] if bad else ''}")
sys.exit(1 if bad or not ok else 0)
