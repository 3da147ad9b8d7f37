#!/usr/bin/env python3
"""hf_reference.py -- Hugging Face transformers reference run of a gpt-oss checkpoint, for parity checks.

Loads a checkpoint folder (real or written by llmr-mkmodel) with transformers 5.x, offline, MXFP4 experts
dequantized by transformers itself (Mxfp4Config(dequantize=True)), attn_implementation="eager" and the eager
experts implementation, in fp32 (default) or bf16; runs one prompt given as token ids; writes what a C harness
needs to compare an engine against it layer by layer.

usage:
  hf_reference.py --model DIR --tokens PROMPT.json --out OUTDIR [--dtype fp32|bf16] [--positions auto|all|LIST]
                  [--greedy N] [--device cuda|cpu] [--fixture FILE.json --fixture-stride K]

PROMPT.json: a JSON array of token ids, or an object {"tokens": [...]}.

OUTPUT (all binary files are raw little-endian, C row-major, no header; shapes are in index.json):
  OUTDIR/index.json
    {
      "format": "llmr-hf-reference-1",
      "model": "<DIR>", "dtype": "fp32"|"bf16", "device": "...", "torch": "...", "transformers": "...",
      "attn_implementation": "eager", "experts_implementation": "eager" (what the model reports using),
      "n_tokens": T, "tokens": [...],                 # the prompt
      "vocab_size": V, "hidden_size": H, "num_layers": L, "num_experts": E, "experts_per_token": K,
      "positions": [p0, p1, ...],                      # P sorted prompt positions (0-based) that were saved
      "files": {
        "logits":        {"path": "logits.f32",        "dtype": "float32", "shape": [P, V]},
        "hidden":        {"path": "hidden.f32",        "dtype": "float32", "shape": [L, P, H]},
        "router_logits": {"path": "router_logits.f32", "dtype": "float32", "shape": [L, T, E]},
        "router_topk":   {"path": "router_topk.i32",   "dtype": "int32",   "shape": [L, T, K]}
      },
      "hidden_norms": [[...P floats...] x L],          # L2 norm of each saved hidden row
      "router_gap": [[...T floats...] x L],            # logit(K-th) - logit(K+1-th) per layer and position
      "min_router_gap": [...T floats...],              # min over layers, per position
      "near_tie_positions": [...],                     # positions whose min_router_gap < 1e-3
      "greedy": {"n": N, "tokens": [...], "top1_logit": [...], "top2_margin": [...],
                 "router_min_gap": [...]}             # when --greedy N > 0
    }
  logits.f32         final logits (after model.norm and lm_head) at the saved positions.
  hidden.f32         output of decoder layer l (the residual stream, before the final norm) at the saved positions.
  router_logits.f32  router logits x.W^T + b of every layer at every prompt position, recomputed in fp32 from
                     the router's input (so near-ties are measured without bf16 rounding).
  router_topk.i32    the K experts with the largest router logits (ties to the lower index), sorted by logit desc.

  greedy: N tokens generated after the prompt by argmax (ties to the lowest id) with the KV cache; top2_margin[i]
  is logit(top1) - logit(top2) of the distribution that produced tokens[i] (step 0 = after the prompt);
  router_min_gap[i] is the smallest 4th/5th router-logit gap over the layers in the forward pass that produced
  that distribution (step 0: the prompt's last position), so the near-tie rule can apply to decode steps.

  --positions auto (default): every position when T <= 64; otherwise 0, 1, 127, 128, 129, 255, 256, 4095, 4096,
  4097 (those < T), 24 evenly spaced positions and T-1. all: every position. LIST: comma-separated ints.

  --fixture FILE.json additionally writes a compact CI fixture (tests/data/gptoss/README.md): for each saved
  position the full fp32 hidden state of the last layer, the logits at ids 0, K, 2K, ... (K = --fixture-stride,
  default 97) plus the top-16 ids and values, and the full vector's L2 norm and sum; and the greedy run.

Exit status: 0 ok, 2 bad arguments or input, 3 transformers/torch missing.
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="checkpoint folder (config.json, shards, index)")
    ap.add_argument("--tokens", required=True, help="JSON file: array of token ids or {\"tokens\": [...]}")
    ap.add_argument("--out", required=True, help="output folder (created)")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--positions", default="auto", help="auto | all | comma-separated positions")
    ap.add_argument("--greedy", type=int, default=0, help="greedy continuation length (0 = none)")
    ap.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    ap.add_argument("--fixture", default=None, help="also write a compact CI fixture JSON here")
    ap.add_argument("--fixture-stride", type=int, default=97, help="vocab stride of the logits kept in the fixture")
    return ap.parse_args()


def choose_positions(spec, T):
    if spec == "all":
        return list(range(T))
    if spec == "auto":
        if T <= 64:
            return list(range(T))
        s = {p for p in (0, 1, 127, 128, 129, 255, 256, 4095, 4096, 4097) if p < T}
        s.update(round(i * (T - 1) / 23) for i in range(24))
        s.add(T - 1)
        return sorted(s)
    try:
        ps = sorted({int(x) for x in spec.split(",") if x.strip()})
    except ValueError:
        sys.exit("hf_reference.py: --positions must be auto, all or comma-separated integers")
    if not ps or ps[0] < 0 or ps[-1] >= T:
        sys.exit(f"hf_reference.py: --positions out of range 0..{T - 1}")
    return ps


def load_tokens(path):
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, dict):
        data = data.get("tokens")
    if not isinstance(data, list) or not data or not all(isinstance(t, int) and t >= 0 for t in data):
        print(f"hf_reference.py: {path}: expected a non-empty JSON array of token ids", file=sys.stderr)
        sys.exit(2)
    return data


def load_model(args, torch, transformers):
    dtype = torch.float32 if args.dtype == "fp32" else torch.bfloat16
    kw = dict(dtype=dtype, attn_implementation="eager")
    try:
        kw["quantization_config"] = transformers.Mxfp4Config(dequantize=True)
    except AttributeError:
        pass
    kw["device_map"] = args.device
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(args.model, experts_implementation="eager", **kw)
    except TypeError:  # a transformers without the experts interface: its experts are eager already
        model = transformers.AutoModelForCausalLM.from_pretrained(args.model, **kw)
    # Dequantized MXFP4 values are exact in bf16 and fp32, so casting after load loses nothing.
    if any(p.is_floating_point() and p.dtype != dtype for p in model.parameters()):
        try:
            model = model.to(dtype=dtype)
        except (ValueError, TypeError):
            for p in model.parameters():
                if p.is_floating_point():
                    p.data = p.data.to(dtype)
    bad = sorted({str(p.dtype) for p in model.parameters() if p.is_floating_point() and p.dtype != dtype})
    if bad:
        print(f"hf_reference.py: parameters left in {bad} after casting to {dtype}", file=sys.stderr)
        sys.exit(2)
    model = model.eval()
    experts_impl = getattr(model.config, "_experts_implementation", None) or "eager (no experts interface)"
    return model, experts_impl


def router_min_gap(layers, router_in, K):
    """Smallest 4th/5th router-logit gap over the layers for the last token of the captured router inputs,
    recomputed in fp32 (1e30 when every expert is chosen)."""
    g = 1e30
    for i, layer in enumerate(layers):
        x = router_in[i].reshape(-1, router_in[i].shape[-1])[-1:].float()
        v = (x @ layer.mlp.router.weight.float().t() + layer.mlp.router.bias.float())[0]
        if v.numel() > K:
            s = v.sort(descending=True).values
            g = min(g, float(s[K - 1] - s[K]))
    return g


def run_greedy(args, model, out, prompt_gap, torch):
    """Greedy continuation with the KV cache. router_min_gap[i] is the smallest 4th/5th router gap of the
    forward pass that produced the distribution of tokens[i] (step 0: the prompt's last position), so the
    issue's near-tie rule applies to decode steps as it does to prompt positions."""
    layers = model.model.layers
    K = model.config.num_experts_per_tok
    router_in = [None] * len(layers)
    handles = [layer.mlp.router.register_forward_pre_hook(lambda mod, inp, i=i: router_in.__setitem__(i, inp[0].detach()))
               for i, layer in enumerate(layers)]
    greedy = {"n": args.greedy, "tokens": [], "top1_logit": [], "top2_margin": [], "router_min_gap": []}
    past = out.past_key_values
    last = out.logits[0, -1].float()
    gap = prompt_gap
    try:
        for step in range(args.greedy):
            top2 = torch.topk(last, 2)
            # argmax ties to the lowest id: torch.argmax returns the first maximal index
            tok = int(torch.argmax(last).item())
            greedy["tokens"].append(tok)
            greedy["top1_logit"].append(float(top2.values[0]))
            greedy["top2_margin"].append(float(top2.values[0] - top2.values[1]))
            greedy["router_min_gap"].append(gap)
            if step + 1 == args.greedy:
                break
            o = model(input_ids=torch.tensor([[tok]], device=args.device), past_key_values=past, use_cache=True)
            past = o.past_key_values
            last = o.logits[0, -1].float()
            gap = router_min_gap(layers, router_in, K)
    finally:
        for h in handles:
            h.remove()
    return greedy


def main():
    args = parse_args()
    try:
        import numpy as np
        import torch
        import transformers
    except ImportError as e:
        print(f"hf_reference.py: {e} (needs torch, numpy and transformers 5.x)", file=sys.stderr)
        return 3
    tokens = load_tokens(args.tokens)
    T = len(tokens)
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_grad_enabled(False)
    model, experts_impl = load_model(args, torch, transformers)
    cfg = model.config
    V, H, L = cfg.vocab_size, cfg.hidden_size, cfg.num_hidden_layers
    E, K = cfg.num_local_experts, cfg.num_experts_per_tok
    if max(tokens) >= V:
        print(f"hf_reference.py: token id {max(tokens)} >= vocab_size {V}", file=sys.stderr)
        return 2
    positions = choose_positions(args.positions, T)
    P = len(positions)
    layers = model.model.layers

    # Hooks: each decoder layer's output (residual stream) and each router's input.
    layer_out = [None] * L
    router_in = [None] * L
    handles = []
    for i, layer in enumerate(layers):
        def out_hook(mod, inp, out, i=i):
            layer_out[i] = (out[0] if isinstance(out, tuple) else out).detach()
        def router_hook(mod, inp, i=i):
            router_in[i] = inp[0].detach()
        handles.append(layer.register_forward_hook(out_hook))
        handles.append(layer.mlp.router.register_forward_pre_hook(router_hook))

    ids = torch.tensor([tokens], dtype=torch.long, device=args.device)
    out = model(input_ids=ids, use_cache=True)
    for h in handles:
        h.remove()

    pos_t = torch.tensor(positions, device=args.device)
    logits = out.logits[0].index_select(0, pos_t).float().cpu().numpy()  # [P, V]
    hidden = np.stack([layer_out[i][0].index_select(0, pos_t).float().cpu().numpy() for i in range(L)])  # [L,P,H]
    rl = []
    for i, layer in enumerate(layers):
        x = router_in[i].reshape(-1, H).float()
        w = layer.mlp.router.weight.float()
        b = layer.mlp.router.bias.float()
        rl.append((x @ w.t() + b).cpu().numpy())  # [T, E]
    router_logits = np.stack(rl).astype(np.float32)  # [L, T, E]
    # top-K with ties to the lower index: stable sort on the negated logits
    order = np.argsort(-router_logits, axis=-1, kind="stable")
    topk = order[..., :K].astype(np.int32)
    srt = np.take_along_axis(router_logits, order, axis=-1)
    # with no unchosen expert there is no tie to fear: 1e30 stands for "no gap" (JSON has no Infinity)
    gap = (srt[..., K - 1] - srt[..., K]) if E > K else np.full((L, T), 1e30, dtype=np.float32)
    min_gap = gap.min(axis=0)

    os.makedirs(args.out, exist_ok=True)
    logits.astype("<f4").tofile(os.path.join(args.out, "logits.f32"))
    hidden.astype("<f4").tofile(os.path.join(args.out, "hidden.f32"))
    router_logits.astype("<f4").tofile(os.path.join(args.out, "router_logits.f32"))
    topk.astype("<i4").tofile(os.path.join(args.out, "router_topk.i32"))

    greedy = None
    if args.greedy > 0:
        greedy = run_greedy(args, model, out, float(min_gap[-1]), torch)

    index = {
        "format": "llmr-hf-reference-1",
        "model": os.path.abspath(args.model),
        "dtype": args.dtype,
        "device": str(torch.cuda.get_device_name(0)) if args.device.startswith("cuda") else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "attn_implementation": getattr(cfg, "_attn_implementation", "eager"),
        "experts_implementation": experts_impl,
        "n_tokens": T,
        "tokens": tokens,
        "vocab_size": V, "hidden_size": H, "num_layers": L, "num_experts": E, "experts_per_token": K,
        "positions": positions,
        "files": {
            "logits": {"path": "logits.f32", "dtype": "float32", "shape": [P, V]},
            "hidden": {"path": "hidden.f32", "dtype": "float32", "shape": [L, P, H]},
            "router_logits": {"path": "router_logits.f32", "dtype": "float32", "shape": [L, T, E]},
            "router_topk": {"path": "router_topk.i32", "dtype": "int32", "shape": [L, T, K]},
        },
        "hidden_norms": [[float(np.linalg.norm(hidden[l, p])) for p in range(P)] for l in range(L)],
        "router_gap": [[float(g) for g in gap[l]] for l in range(L)],
        "min_router_gap": [float(g) for g in min_gap],
        "near_tie_positions": [int(p) for p in np.nonzero(min_gap < 1e-3)[0]],
    }
    if greedy:
        index["greedy"] = greedy
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump(index, f)
        f.write("\n")

    if args.fixture:
        write_fixture(args, index, logits, hidden, np)
    print(f"hf_reference.py: {T} tokens, {P} positions saved, dtype {args.dtype}, experts {experts_impl}, "
          f"near-tie positions {len(index['near_tie_positions'])}" +
          (f", greedy {greedy['tokens'][:8]}..." if greedy else "") + f" -> {args.out}")
    return 0


def write_fixture(args, index, logits, hidden, np):
    stride = max(1, args.fixture_stride)
    V = index["vocab_size"]
    entries = []
    for i, p in enumerate(index["positions"]):
        row = logits[i].astype(np.float64)
        top = np.argsort(-logits[i], kind="stable")[:16]
        entries.append({
            "position": p,
            "hidden_last": [float(v) for v in hidden[-1, i]],
            "logits_strided": [float(v) for v in logits[i, ::stride]],
            "top_ids": [int(t) for t in top],
            "top_logits": [float(logits[i, t]) for t in top],
            "l2": float(np.sqrt((row * row).sum())),
            "sum": float(row.sum()),
        })
    fx = {
        "format": "llmr-gptoss-logits-fixture-1",
        "dtype": index["dtype"], "device": index["device"], "torch": index["torch"],
        "transformers": index["transformers"], "experts_implementation": index["experts_implementation"],
        "vocab_size": V, "stride": stride, "tokens": index["tokens"],
        "positions": entries,
        "min_router_gap": [index["min_router_gap"][e["position"]] for e in entries],
    }
    if "greedy" in index:
        fx["greedy"] = index["greedy"]
    with open(args.fixture, "w") as f:
        json.dump(fx, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
