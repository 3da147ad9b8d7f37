#!/usr/bin/env python3
"""List the CUDA engine's kernels whose PTX has a load after a store, in program order (a performance aid, no GPU).

Why: a store through one pointer may alias a later load through another as far as the compiler knows, so it cannot
move that load above the store. When the stored value came from an earlier load, each such pair costs one memory
round trip in series (session 41: the router, session 42: the combine + norm kernel and the expert launches' epilogue).
A kernel listed here is worth a look at its source; one not listed can still have the pattern inside a rolled loop,
whose body counts once.

usage: tests/gpu/ptx_load_after_store.py [--min N] [--nvcc PATH] [FILE.cu ...]
    (default: every engines/gptoss_cuda/*.cu; run from the repository root)
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

TYPES = r"(f32|f64|u8|u16|u32|u64|s8|s16|s32|s64|b8|b16|b32|b64|v2|v4)"
LOAD = re.compile(r"ld\.(global|(volatile\.)?" + TYPES + ")")  # global or generic (not shared, local, param, const)
# stores, reductions and atomics to global or generic addresses (red.shared and atom.shared are not)
STORE = re.compile(r"(st\.(global|(volatile\.)?" + TYPES + "))|red\.(?!shared)|atom\.(?!shared)")
ENTRY = re.compile(r"\.entry\s+(\S+)\((.*?)\n\}", re.S)


def scan(ptx):
    """(kernel, loads after a store, loads, stores) for each entry of a PTX text."""
    out = []
    for m in ENTRY.finditer(ptx):
        after = loads = stores = 0
        last_store = False
        for line in m.group(2).split("\n"):
            op = line.strip()
            if STORE.match(op):
                stores += 1
                last_store = True
            elif LOAD.match(op):
                loads += 1
                after += last_store
                last_store = False
        out.append((m.group(1), after, loads, stores))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", help="CUDA sources (default: engines/gptoss_cuda/*.cu)")
    ap.add_argument("--min", type=int, default=1, help="list kernels with at least this many (default 1)")
    ap.add_argument("--nvcc", default=os.environ.get("NVCC", "nvcc"), help="the compiler (default: $NVCC or nvcc)")
    a = ap.parse_args()
    files = a.files or sorted(glob.glob("engines/gptoss_cuda/*.cu"))
    if not files:
        sys.exit("ptx_load_after_store: no sources (run from the repository root or name them)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            ptx = os.path.join(tmp, os.path.basename(f) + ".ptx")
            cmd = [a.nvcc, "-O3", "-std=c++17", "-I.", "-Iengines/include", "-arch=sm_90a", "-ptx", f, "-o", ptx]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                sys.exit("ptx_load_after_store: %s failed:\n%s" % (" ".join(cmd), r.stderr))
            rows += [(os.path.basename(f),) + k for k in scan(open(ptx).read())]
    rows.sort(key=lambda r: -r[2])
    print("%6s %6s %6s  %-24s %s" % ("after", "loads", "stores", "file", "kernel (mangled)"))
    for f, k, after, loads, stores in rows:
        if after >= a.min:
            print("%6d %6d %6d  %-24s %s" % (after, loads, stores, f, k))


if __name__ == "__main__":
    main()
