#!/usr/bin/env python3
"""hf_prefill.py — transformers prefill of the same prompt lengths on the same checkpoint, for the
bench/prefill table (bf16, MXFP4 dequantized by transformers: Mxfp4Config(dequantize=True)).

  hf_prefill.py --model DIR [--lengths 128,512,1024,4096] [--reps 2]

One forward pass over L deterministic random token ids (use_cache=False, the logits of every row as
transformers computes them), one untimed warm-up per length, best of --reps, torch.cuda.synchronize
around each. Prints one table row per length; exits 0 with "SKIP" when torch/transformers/CUDA are
missing. Peak memory is torch.cuda.max_memory_allocated after each length."""
import argparse
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--lengths", default="128,512,1024,4096")
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",") if x]
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"SKIP transformers prefill: {e}")
        return 0
    if not torch.cuda.is_available():
        print("SKIP transformers prefill: no CUDA device for torch")
        return 0
    kw = dict(dtype=torch.bfloat16, device_map="cuda")
    try:
        kw["quantization_config"] = transformers.Mxfp4Config(dequantize=True)
    except AttributeError:
        pass
    t0 = time.time()
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, **kw).eval()
    attn = getattr(model.config, "_attn_implementation", "?")
    experts = getattr(model.config, "_experts_implementation", "?")
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name(0)}; "
          f"load {time.time() - t0:.1f} s; attention {attn}, experts {experts}")
    print(f"{'tokens':>8} {'ms':>10} {'tok/s':>11} {'peak GB':>9}")
    g = torch.Generator().manual_seed(1)
    vocab = min(model.config.vocab_size, 199998)
    for L in lengths:
        ids = torch.randint(0, vocab, (1, L), generator=g).to("cuda")
        best = None
        try:
            torch.cuda.reset_peak_memory_stats()
            with torch.inference_mode():
                for r in range(args.reps + 1):
                    torch.cuda.synchronize()
                    t = time.perf_counter()
                    model(input_ids=ids, use_cache=False)
                    torch.cuda.synchronize()
                    dt = time.perf_counter() - t
                    if r > 0 and (best is None or dt < best):
                        best = dt
        except torch.OutOfMemoryError as e:
            print(f"{L:>8} out of GPU memory: {str(e)[:120]}")
            torch.cuda.empty_cache()
            continue
        print(f"{L:>8} {best * 1e3:>10.2f} {L / best:>11.0f} {torch.cuda.max_memory_allocated() / 1e9:>9.2f}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
