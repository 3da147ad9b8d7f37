#!/usr/bin/env bash
# tests/gpu/parity/run.sh — parity of the gptoss_cuda engine with Hugging Face transformers, one command
# on a GPU machine (needs python3 with torch + transformers 5.x; works offline).
#
#   tests/gpu/parity/run.sh [--build DIR] [--out DIR] [--presets "tiny small"] [--seeds "1 2 3"]
#                           [--lengths "16 300 5000"] [--greedy 64] [--dtype fp32|bf16] [--no-unit] [--bench]
#                           [--piece 256]
#
# Steps: (1) the kernel tests (build/tests/gpu/gptoss_kernels) and the engine self-test
# (build/tests/gpu/gptoss_parity); (2) for each preset and checkpoint seed: llmr-mkmodel writes the
# checkpoint, hf_reference.py runs transformers on each prompt length (one Python process per checkpoint,
# the model loaded once), then gptoss_parity compares our engine layer by layer and greedy step by step.
# --bench also runs build/bench/decode (batch-1 decode tok/s vs the copy-bandwidth roofline) on each
# checkpoint. --piece: prompt tokens per debug forward of gptoss_parity (default 256; 2048 puts a 2,000-token
# prompt through one prefill chunk). Prompts are deterministic random token ids. Full reports go to
# OUT/reports.txt; stdout ends with the parity table and the acceptance verdicts. Exit 0 when every verdict
# passes, 1 otherwise, 0 with "SKIP" when there is no GPU or no torch.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=build PRESETS="tiny small" SEEDS="1 2 3" LENGTHS="16 300 5000" GREEDY=64 DTYPE=fp32 UNIT=1 BENCH=0 PIECE=256
OUTDIR=${OUT:-/tmp/llmr-parity}/parity
WORK=${PARITY_WORK:-/tmp/llmr-parity-work}
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    --presets) PRESETS=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --lengths) LENGTHS=$2; shift 2 ;;
    --greedy) GREEDY=$2; shift 2 ;;
    --dtype) DTYPE=$2; shift 2 ;;
    --no-unit) UNIT=0; shift ;;
    --bench) BENCH=1; shift ;;
    --piece) PIECE=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no NVIDIA GPU here"; exit 0
fi
if ! python3 -c 'import torch, transformers, numpy' 2>/dev/null; then
  echo "SKIP: python3 lacks torch/transformers/numpy"; exit 0
fi
mkdir -p "$OUTDIR" "$WORK/logs"
LOGS=$WORK/logs   # one file per step; concatenated into OUT/reports.txt at the end
SUMMARY=$OUTDIR/summary.jsonl
: >"$SUMMARY"
fail=0
GPU=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
echo "GPU: $GPU"

if [ "$UNIT" = 1 ]; then
  "$BUILD/tests/gpu/gptoss_kernels" >"$OUTDIR/kernels.txt" 2>&1 || fail=1
  grep -E '^(FAIL|device)|checks' "$OUTDIR/kernels.txt"
  "$BUILD/tests/gpu/gptoss_parity" >"$OUTDIR/selftest.txt" 2>&1 || fail=1
  grep -E '^FAIL|checks|Error|error' "$OUTDIR/selftest.txt"
fi

for preset in $PRESETS; do
  for seed in $SEEDS; do
    model=$WORK/$preset-$seed
    t0=$(date +%s)
    "$BUILD/bin/llmr-mkmodel" --preset "$preset" --seed "$seed" --out "$model" >"$LOGS/mkmodel-$preset-$seed.txt" 2>&1 \
      || { echo "mkmodel $preset seed $seed failed"; tail -5 "$LOGS/mkmodel-$preset-$seed.txt"; fail=1; continue; }
    jobs=()
    for len in $LENGTHS; do
      python3 - "$WORK/prompt-$len.json" "$len" <<'PY'
import json, random, sys
rng = random.Random(1000003 * int(sys.argv[2]) + 7)
json.dump([rng.randrange(0, 199998) for _ in range(int(sys.argv[2]))], open(sys.argv[1], "w"))
PY
      rm -rf "$WORK/ref-$preset-$seed-$len"
      jobs+=("$model|$WORK/prompt-$len.json|$WORK/ref-$preset-$seed-$len")
    done
    t1=$(date +%s)
    # One Python process per checkpoint: hf_reference.main() per prompt, the model loaded once.
    PYTHONUNBUFFERED=1 python3 - "$HERE" "$GREEDY" "$DTYPE" "${jobs[@]}" >"$LOGS/hf-$preset-$seed.txt" 2>&1 <<'PY'
import importlib.util, sys
here, greedy, dtype, jobs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
spec = importlib.util.spec_from_file_location("hf_reference", here + "/hf_reference.py")
h = importlib.util.module_from_spec(spec)
spec.loader.exec_module(h)
cache, orig = {}, h.load_model
def cached(args, torch, transformers):
    key = (args.model, args.dtype)
    if key not in cache:
        cache.clear()
        cache[key] = orig(args, torch, transformers)
    return cache[key]
h.load_model = cached
# Load straight onto the GPU (transformers then dequantizes MXFP4 there): the fp32 20b is ~84 GB, too
# much to stage in host memory first. Falls back to the script's own loading if that fails.
import torch, transformers
auto = transformers.AutoModelForCausalLM
orig_fp = auto.from_pretrained
def on_gpu(*a, **k):
    if torch.cuda.is_available() and "device_map" not in k:
        try:
            return orig_fp(*a, device_map="cuda", **k)
        except Exception as e:  # noqa: BLE001 - report and retry the plain way
            print(f"run.sh: device_map=cuda load failed ({e}); loading on the host", flush=True)
    return orig_fp(*a, **k)
auto.from_pretrained = on_gpu
for job in jobs:
    model, tokens, out = job.split("|")
    sys.argv = ["hf_reference.py", "--model", model, "--tokens", tokens, "--out", out, "--greedy", greedy, "--dtype", dtype]
    rc = h.main()
    if rc:
        sys.exit(rc)
PY
    [ $? -eq 0 ] || { echo "hf_reference $preset seed $seed failed:"; tail -15 "$LOGS/hf-$preset-$seed.txt"; fail=1; continue; }
    t2=$(date +%s)
    for len in $LENGTHS; do
      label="$preset/seed$seed/len$len"
      "$BUILD/tests/gpu/gptoss_parity" --model "$model" --ref "$WORK/ref-$preset-$seed-$len" --greedy "$GREEDY" \
        --piece "$PIECE" --label "$label" --json "$SUMMARY" >"$LOGS/parity-$preset-$seed-$len.txt" 2>&1 || fail=1
      grep -E '^(VERDICT|timing)' "$LOGS/parity-$preset-$seed-$len.txt" || { echo "$label: no verdict"; tail -5 "$LOGS/parity-$preset-$seed-$len.txt"; }
    done
    if [ "$BENCH" = 1 ]; then
      "$BUILD/bench/decode" --model "$model" --contexts 128,1024,4096 --tokens 64 >"$OUTDIR/bench-$preset-$seed.txt" 2>&1 || fail=1
      cat "$OUTDIR/bench-$preset-$seed.txt"
    fi
    echo "  ($preset seed $seed: mkmodel $((t1-t0))s, transformers $((t2-t1))s, engine $(( $(date +%s)-t2 ))s)"
    rm -rf "$model" "$WORK"/ref-"$preset"-"$seed"-*
  done
done

for f in "$LOGS"/*.txt; do echo "===== $(basename "$f")"; cat "$f"; done >"$OUTDIR/reports.txt" 2>/dev/null
rm -f "$LOGS"/*.txt
python3 - "$SUMMARY" "$GPU" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"\nParity table (GPU: {sys.argv[2]}); logits = max relative L2 error of the final logits")
print(f"{'':<22}{'':>5}{'':>6}{'--- free-running ---':>34}{'--- forced routing ---':>28}")
print(f"{'run':<22}{'ref':>5}{'excl':>6}{'logits':>10}{'top-1':>8}{'rtr diff':>9}{'greedy':>8}"
      f"{'logits':>10}{'top-1':>8}{'greedy':>8}{'1st tie':>9}{'forced-tok':>11}{'dec tie':>8}  verdict")
for r in rows:
    tie = r["first_tie"]
    fg = f"{r['free_greedy']}/{r['greedy_n']}" + ("*" if r.get("free_noise") else "")
    og = f"{r['forced_greedy']}/{r['greedy_n']}" + ("*" if r.get("forced_noise") else "")
    verdict = "PASS" if r.get("literal", r["pass"]) else ("PASS, explained" if r["pass"] else "FAIL")
    print(f"{r['label']:<22}{r['ref_dtype']:>5}{r['excluded']:>6}{r['free_logits_kept']:>10.2e}"
          f"{str(r['free_top1']) + '/' + str(r['saved']):>8}{r['free_router_diff']:>9}{fg:>8}"
          f"{r['forced_logits_all']:>10.2e}{str(r['forced_top1']) + '/' + str(r['saved']):>8}{og:>8}"
          f"{('-' if tie < 0 else str(tie)):>9}{str(r.get('tf_agree', '?')) + '/' + str(r['greedy_n']):>11}"
          f"{('-' if r.get('decode_tie', -1) < 0 else str(r['decode_tie'])):>8}  {verdict}")
print("* greedy diverged at a step whose reference top-2 margin is within 2x the largest measured |logit error|")
print("forced-tok: steps where the engine, fed the reference's own greedy tokens, picks the reference's token;")
print("dec tie: first decode step with a router near-tie (4th/5th gap < 1e-3) in this engine ('-': none)")
print("1st tie: first greedy step where the reference's top-2 margin is <= 1e-3 or its router had a 4th/5th gap")
print("< 1e-3 in the forward pass behind that step (the prompt-position near-tie rule applied to decode steps)")
print("PASS = the issue's criterion as written. 'PASS, explained' = it fails only through expert flips at prompt")
print("router near-ties (the forced-routing logits pass) and a greedy divergence that teacher forcing shows to be")
print("compounding noise (every reference token reproduced up to the first near-tie), a decode-step router")
print("near-tie at or before it, or a margin within 2x the measured logit error. FAIL otherwise.")
PY
[ $fail -eq 0 ] && echo "ALL PASS" || echo "SOME CHECKS FAILED"
exit $fail
