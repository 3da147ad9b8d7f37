#!/usr/bin/env python3
"""Where a kernel's warps stall, from ncu's source page (a performance aid; the page comes from the GPU machine:
tests/gpu/ncu_source.sh writes it, or `ncu -i R.ncu-rep --page source --csv --print-source sass > k.csv`).

Why: a kernel's summary says which stall reasons dominate, not where. This prints the share of the kernel's warp-state
samples each reason takes, the instructions with the most samples (with their three largest reasons and how often
they ran), and with --cuts, the samples and executed instructions of each address range (a prologue, a loop, a
barrier), as performance.md's session 47 table. Addresses are offsets from the kernel's first instruction.

usage: tests/gpu/stall_regions.py [--top N] [--cuts HEX,HEX,... --names A,B,...] FILE.csv[.xz]
    --top N    the N instructions with the most samples (default 20; 0: none)
    --cuts     the first offset of each region, ascending (the first should be 0); --names names them, one each
"""
import argparse
import collections
import csv
import lzma
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def read(path):
    """(stall reason columns, rows as (offset, instruction, samples, executed, {reason: samples})) of a source page."""
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", newline="") as f:
        lines = list(csv.reader(f))
    head = next((i for i, r in enumerate(lines) if r and r[0] == "Address"), None)
    if head is None or SAMPLES not in lines[head]:
        raise ValueError(f"{path}: not an ncu source page (no 'Address' header with '{SAMPLES}')")
    cols = {k: i for i, k in enumerate(lines[head])}
    reasons = [k for k in lines[head] if k.startswith("stall_") and "Not Issued" not in k]
    rows, base = [], None
    for r in lines[head + 1:]:
        if len(r) < len(cols) or not r[0].startswith("0x"):
            continue
        addr = int(r[0], 16)
        base = addr if base is None else base
        num = lambda k: int(float(r[cols[k]] or 0)) if r[cols[k]] not in ("-", "") else 0
        rows.append((addr - base, r[cols["Source"]].strip(), num(SAMPLES), num(EXECUTED),
                     {k[6:]: num(k) for k in reasons}))
    if not rows:
        raise ValueError(f"{path}: no instructions")
    return rows


def shares(counter, total):
    return " ".join(f"{k}={v * 100 / total:.1f}%" for k, v in counter.most_common() if v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--cuts", default="")
    ap.add_argument("--names", default="")
    ap.add_argument("file")
    a = ap.parse_args()
    try:
        rows = read(a.file)
        cuts = [int(c, 16) for c in a.cuts.split(",")] if a.cuts else []
    except (OSError, ValueError, EOFError, lzma.LZMAError) as e:
        print(f"stall_regions.py: {e}", file=sys.stderr)
        return 2
    names = a.names.split(",") if a.names else [f"{c:x}" for c in cuts]
    if cuts and (len(names) != len(cuts) or cuts != sorted(cuts)):
        print("stall_regions.py: --cuts must ascend and --names name each of them", file=sys.stderr)
        return 2
    total = sum(r[2] for r in rows) or 1
    reasons = collections.Counter()
    for r in rows:
        reasons.update(r[4])
    print(f"{len(rows)} instructions, {sum(r[2] for r in rows)} samples: {shares(reasons, total)}")
    for off, text, s, ex, why in sorted(rows, key=lambda r: -r[2])[:a.top]:
        top = " ".join(f"{k}:{v}" for k, v in collections.Counter(why).most_common(3) if v)
        print(f"{off:6x} {s * 100 / total:5.1f}% x{ex:<8} {text[:64]:64s} {top}")
    if cuts:
        region = collections.OrderedDict((n, [0, 0, collections.Counter()]) for n in names)
        for off, _, s, ex, why in rows:
            i = max(sum(off >= c for c in cuts) - 1, 0)
            region[names[i]][0] += s
            region[names[i]][1] += ex
            region[names[i]][2].update(why)
        for n, (s, ex, why) in region.items():
            print(f"{n:14s} {s * 100 / total:5.1f}% of samples, {ex:>9} warp-instructions: "
                  + " ".join(f"{k}:{v * 100 / max(s, 1):.0f}%" for k, v in why.most_common(4) if v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
