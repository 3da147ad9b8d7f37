#!/usr/bin/env python3
"""Encode throughput of Hugging Face `tokenizers` (Rust) on a corpus file, chunked exactly as
build/bench/tokenizer does (100000-byte chunks, each extended to the next newline).

    python3 bench/tokenizer/hf_tokenizers.py CORPUS TOKENIZER_JSON [--rounds N] [--llmr-tokenize BIN]

Make the corpus with `build/bench/tokenizer --write-corpus CORPUS` (10 MB, deterministic).
With --llmr-tokenize, also encodes every chunk with that binary (--jsonl) and reports whether the
ids are identical to HF's: a real HF conformance check on the same 10 MB.
"""
import argparse, json, subprocess, sys, time


def chunks_of(data, size=100000):
    out, at = [], 0
    while at < len(data):
        end = min(at + size, len(data))
        while end < len(data) and data[end - 1] != 0x0A:
            end += 1
        out.append(data[at:end].decode("utf-8"))
        at = end
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("tokenizer_json")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--llmr-tokenize", help="path of build/bin/llmr-tokenize to compare ids with")
    a = ap.parse_args()
    from tokenizers import Tokenizer  # imported here so --help works without it

    t0 = time.perf_counter()
    tok = Tokenizer.from_file(a.tokenizer_json)
    load_ms = (time.perf_counter() - t0) * 1e3
    data = open(a.corpus, "rb").read()
    chunks = chunks_of(data)
    best, hf_ids = float("inf"), None
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        hf_ids = [tok.encode(c, add_special_tokens=False).ids for c in chunks]
        best = min(best, time.perf_counter() - t0)
    n = sum(len(x) for x in hf_ids)
    print(f"hf_load_ms: {load_ms:.1f}")
    print(f"hf_ids: {n}")
    print(f"hf_encode_MBps: {len(data) / 1e6 / best:.2f} (single thread, best of {a.rounds}, {len(chunks)} chunks)")
    if a.llmr_tokenize:
        inp = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in chunks).encode("utf-8")
        r = subprocess.run([a.llmr_tokenize, "--tokenizer", a.tokenizer_json, "--jsonl"], input=inp,
                           capture_output=True, check=True)
        ours = [json.loads(l) for l in r.stdout.decode().splitlines() if l]
        bad = [i for i, (x, y) in enumerate(zip(ours, hf_ids)) if x != y]
        if len(ours) != len(hf_ids) or bad:
            i = bad[0] if bad else 0
            k = next((j for j, (x, y) in enumerate(zip(ours[i], hf_ids[i])) if x != y), 0)
            print(f"conformance: MISMATCH in {len(bad)} of {len(chunks)} chunks; chunk {i} id {k}: "
                  f"llmr {ours[i][max(0, k - 2):k + 4]} hf {hf_ids[i][max(0, k - 2):k + 4]}")
            sys.exit(1)
        print(f"conformance: llmr ids identical to HF tokenizers on all {len(chunks)} chunks")


if __name__ == "__main__":
    main()
