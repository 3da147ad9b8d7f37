#!/usr/bin/env python3
"""Where a kernel's warps first wait on their global loads, from its SASS (a performance aid; the SASS comes from the
GPU machine: `cuobjdump -sass -fun MANGLED_NAME lib.so > kernel.s`, as the call scripts of docs/performance.md dump it).

Why: ptxas issues a load, then sometimes puts its first use (a bf16 conversion, a move of a default value into the
same register, a store of the loaded value) right after it, and the warp stalls there a full round trip while loads
further down the kernel have not been issued yet. Session 45 found that in the batch-1 attention's V loads, session 46
in o_proj's start (-1% a batch-1 step once removed). Each line printed is one such wait: the instruction, the load it
waits on (by address), how many loads were issued between the two, and how many were still in flight. A wait with few
loads issued since, early in a kernel, is worth a look; one after a full wave of loads is the wave being consumed.
Straight-line approximation: branches are ignored and loads are assumed to return in order.

usage: tests/gpu/sass_load_waits.py [--limit N] FILE.s
    --limit N  read at most the first N instructions (default: all)
"""
import argparse
import re
import sys

INSTR = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")
PRED = re.compile(r"(@!?U?P[T0-9]+)\s+(.*)")
REG = re.compile(r"\bR(\d+)(\.64)?")
NO_DEST = ("ST", "RED", "ATOM", "BAR", "BRA", "CCTL", "EXIT", "BSYNC", "BSSY", "MEMBAR")
WIDE_DEST = ("LD", "S2R", "MOV", "IMAD", "LDS", "LDC")


def regs(operand, width):
    """The registers an operand names: R4.64 is R4-R5; a 128-bit access's R8 is R8-R11 (width)."""
    out = []
    for n, pair in REG.findall(operand):
        out += range(int(n), int(n) + (2 if pair else width))
    return out


def waits(lines, limit):
    """(address, instruction, kind, load address, loads issued since it, loads in flight) for each wait."""
    ins = [m.groups() for m in map(INSTR.match, lines) if m][:limit]
    pending, nload, out = {}, 0, []  # pending: register -> (load address, load index)
    for addr, text in ins:
        m = PRED.match(text)
        body = m.group(2) if m else text
        op, _, args = body.partition(" ")
        ops = [o.strip() for o in args.split(",")] if args else []
        width = 4 if ".128" in op else 2 if ".64" in op else 1
        no_dest = op.startswith(NO_DEST)
        dst = [] if no_dest or not ops or not ops[0].startswith("R") else \
            regs(ops[0], width if op.startswith(WIDE_DEST) or ".128" in op else 1)
        srcs = []
        for k, o in enumerate(ops):
            if k == 0 and dst:
                continue
            srcs += regs(o, width if no_dest and not o.startswith("[") else 1)
        hit = [r for r in set(srcs + dst) if r in pending]
        if hit:
            load_addr, li = min(pending[r] for r in hit)
            kind = "reads" if any(r in pending for r in srcs) else "overwrites"
            out.append((addr, text, kind, load_addr, nload - li - 1, len(set(pending.values()))))
            for r in [r for r in pending if pending[r][1] <= li]:
                del pending[r]
        if op.startswith(("LDG", "LD.", "LD ")) and dst:
            for r in dst:
                pending[r] = (addr, nload)
            nload += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", help="a cuobjdump -sass listing of one kernel")
    ap.add_argument("--limit", type=int, default=None, help="the first N instructions only")
    a = ap.parse_args()
    try:
        with open(a.file) as f:
            lines = f.readlines()
    except OSError as e:
        print(f"sass_load_waits.py: {e}", file=sys.stderr)
        return 2
    found = waits(lines, a.limit)
    if not any(INSTR.match(x) for x in lines):
        print(f"sass_load_waits.py: {a.file} has no SASS instructions (cuobjdump -sass -fun NAME lib.so)",
              file=sys.stderr)
        return 2
    for addr, text, kind, load_addr, since, inflight in found:
        print(f"{addr}: {text[:72]:72s} {kind} the load at {load_addr} "
              f"({since} loads issued since, {inflight} in flight)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
