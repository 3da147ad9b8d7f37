#!/usr/bin/env python3
"""transformers_baseline.py -- Hugging Face transformers decoding the same gpt-oss checkpoint, for side-by-side
figures next to bench/decode and bench/throughput (issue 10 asks for the comparison in the same bench call;
the prefill comparison is bench/prefill/hf_prefill.py, which bench/prefill/run.sh runs).

usage:
  transformers_baseline.py --model DIR [--batches 1,8,32] [--prompt 128] [--tokens 64]
                           [--attn eager|sdpa] [--device cuda]

Loads the checkpoint with transformers 5.x offline in bf16, MXFP4 experts dequantized by transformers
(Mxfp4Config(dequantize=True)), the attention implementation given (default eager, as in the issue's
figures) and transformers' default experts implementation. Then, for each batch size B: B deterministic
random prompts of --prompt tokens, prefilled, then --tokens greedy steps with the KV cache (a plain loop of
model() calls, no early stop); aggregate output tok/s = B * tokens / decode time, per-step p50/p99 latency.
Prints one table; writes nothing else. Exit 0; 3 when torch/transformers are missing (prints SKIP).
"""
import argparse
import os
import random
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def ints(s):
    return [int(x) for x in s.split(",") if x.strip()]


def load(args, torch, transformers):
    kw = dict(dtype=torch.bfloat16, attn_implementation=args.attn, device_map=args.device)
    try:
        kw["quantization_config"] = transformers.Mxfp4Config(dequantize=True)
    except AttributeError:
        pass
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, **kw)
    if any(p.is_floating_point() and p.dtype != torch.bfloat16 for p in model.parameters()):
        model = model.to(dtype=torch.bfloat16)
    return model.eval()


def prompts(B, T, V, seed):
    rng = random.Random(seed)
    return [[rng.randrange(0, min(V, 199998)) for _ in range(T)] for _ in range(B)]


def decode(model, torch, args, B, V):
    ids = torch.tensor(prompts(B, args.prompt, V, 17 + B), device=args.device)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model(input_ids=ids, use_cache=True)
    torch.cuda.synchronize()
    t_prefill = time.perf_counter() - t0
    past, last = out.past_key_values, out.logits[:, -1]
    steps = []
    for _ in range(args.tokens):
        tok = torch.argmax(last.float(), dim=-1, keepdim=True)
        t1 = time.perf_counter()
        o = model(input_ids=tok, past_key_values=past, use_cache=True)
        past, last = o.past_key_values, o.logits[:, -1]
        torch.cuda.synchronize()
        steps.append(time.perf_counter() - t1)
    total = sum(steps)
    s = sorted(steps)
    return B * args.tokens / total, s[len(s) // 2] * 1e3, s[min(len(s) - 1, int(0.99 * len(s)))] * 1e3, \
        B * args.prompt / t_prefill



def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--attn", default="eager", choices=["eager", "sdpa"])
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"SKIP transformers baseline: {e}")
        return 3
    if not torch.cuda.is_available():
        print("SKIP transformers baseline: no CUDA device")
        return 0
    torch.set_grad_enabled(False)
    t0 = time.perf_counter()
    model = load(args, torch, transformers)
    V = model.config.vocab_size
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name(0)}, "
          f"bf16, attention {args.attn}, experts {getattr(model.config, '_experts_implementation', 'default')}, "
          f"load {time.perf_counter() - t0:.1f} s, VRAM {torch.cuda.memory_allocated() / 2**30:.1f} GiB")
    print(f"{'what':<28}{'tok/s':>10}{'p50 ms':>9}{'p99 ms':>9}")
    for B in ints(args.batches):
        tps, p50, p99, ptps = decode(model, torch, args, B, V)
        print(f"{f'decode batch {B} (ctx {args.prompt})':<28}{tps:>10.1f}{p50:>9.2f}{p99:>9.2f}   (prefill {ptps:.0f} tok/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
