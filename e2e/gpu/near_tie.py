#!/usr/bin/env python3
"""e2e/gpu/near_tie.py - judges one greedy completion sent alone against the same one sent in a batch, from their
/v1/completions answers with logprobs (e2e/gpu/serving.sh).

usage: near_tie.py ALONE.json BATCHED.json
The lone and batched decode paths add in different orders, so their logits differ at the fp32 level: over the
tokens both chose, their log-probabilities agree within ~1e-5 nats on the tiny model and ~1e-3 on the 20b
(session 21). Two things may still set them apart, both knife-edges that fp32 rounding breaks either way:
  - a logit near-tie: where the tokens part, each path ranked both tokens as its two most likely, within 0.02
    nats. Checked here in full: exit 0;
  - a router near-tie: a layer's 4th and 5th experts within rounding of each other for one token, so the paths
    mix different experts there. That token's hidden state differs (~0.1 nats on the 20b's random weights, whose
    next-token distributions are flat: top-2 gaps of 0.1-0.6), later tokens see it through the KV cache, and
    the tokens may part where they are that close. The logprobs cannot show the router, so this prints where
    the paths part (the first token off by more than 0.01 nats, or the first different token) and exits 3;
    the caller bounds how many requests may do so. tests/gpu/gptoss_batching checks router flips causally.
A request whose paths part within its first 4 tokens is a fault whatever the cause (requests mixed up, a wrong
position or KV page): exit 1. Prints one line."""
import json
import sys

TIE = 0.02      # nats: a logit near-tie where the tokens part
ONSET = 0.01    # nats: above the 20b's fp32-level differences (<= 1.2e-3 measured), below a router flip's (~0.1)
MIN_AGREE = 4   # tokens both paths must share at fp32 level before any knife-edge


def logprobs(path):
    c = json.load(open(path))["choices"][0]
    lp = c.get("logprobs")
    if not lp or not lp.get("tokens"):
        raise SystemExit("FAIL: %s has no logprobs: %s" % (path, json.dumps(c)[:300]))
    return c["text"], lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]


def main():
    text_a, tok_a, lp_a, top_a = logprobs(sys.argv[1])
    text_b, tok_b, lp_b, top_b = logprobs(sys.argv[2])
    n = next((k for k in range(min(len(tok_a), len(tok_b))) if tok_a[k] != tok_b[k]), min(len(tok_a), len(tok_b)))
    d = [abs(lp_a[k] - lp_b[k]) for k in range(n)]
    onset = next((k for k in range(n) if d[k] > ONSET), None)
    parted = n < max(len(tok_a), len(tok_b))
    before = "log-probabilities within %.2g nats" % max(d[:onset if onset is not None else n], default=0.0)
    if onset is None and not parted:
        if text_a != text_b:
            print("FAIL: the same %d tokens give different texts: %r vs %r" % (n, text_a[:80], text_b[:80]))
            return 1
        print("same %d tokens, %s" % (n, before))
        return 0
    where = onset if onset is not None else n
    if where < MIN_AGREE:
        what = "token %d (%r) %.3g nats apart" % (where, tok_a[where], d[where]) if onset is not None else \
            "token %d: alone %r, batched %r" % (n, tok_a[n] if n < len(tok_a) else None, tok_b[n] if n < len(tok_b) else None)
        print("FAIL: the paths part within the first %d tokens: %s" % (MIN_AGREE, what))
        return 1
    if onset is None and n < len(tok_a) and n < len(tok_b):
        a, b = tok_a[n], tok_b[n]
        ma = top_a[n].get(a, lp_a[n]) - top_a[n][b] if b in top_a[n] else None
        mb = top_b[n].get(b, lp_b[n]) - top_b[n][a] if a in top_b[n] else None
        if ma is not None and mb is not None and ma <= TIE and mb <= TIE:
            print("near-tie after %d equal tokens: alone %r, batched %r, margins %.2g (alone) and %.2g (batched) nats; "
                  "before it, %s" % (n, a, b, ma, mb, before))
            return 0
    if onset is not None:
        what = "token %d (%r) %.3g nats apart, then %s" % (
            onset, tok_a[onset], d[onset],
            "the same tokens to the end" if not parted else "parting after %d equal tokens" % n)
    else:
        what = "parting after %d equal tokens (alone %r, batched %r), not a logit near-tie" % (
            n, tok_a[n] if n < len(tok_a) else None, tok_b[n] if n < len(tok_b) else None)
    print("knife-edge: %s; before it, %s" % (what, before))
    return 3


if __name__ == "__main__":
    sys.exit(main())
