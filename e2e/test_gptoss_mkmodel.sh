#!/usr/bin/env bash
# llmr-mkmodel and llmr-gptoss-ref as a user meets them: --help, bad arguments named, the real 20b shard
# plan, a tiny checkpoint written with 1 and 3 threads byte for byte the same, an index that agrees with
# the shard headers, the shipped chat template and tokenizer, and the real tokenizer driving the C
# reference end to end (text -> ids -> greedy tokens -> text).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${LLMR_BUILD:-build}"
MK="$BUILD/bin/llmr-mkmodel" REF="$BUILD/bin/llmr-gptoss-ref" TOK="$BUILD/bin/llmr-tokenize"
CACHE="${LLMR_CACHE:-$HOME/.cache/llmr}"
[ -x "$MK" ] && [ -x "$REF" ] || { echo "FAIL: build first ($MK, $REF)"; exit 1; }
tmp=$(mktemp -d /tmp/llmr-mkmodel-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
. e2e/lib/check.sh

check "mkmodel --help" 0 "usage: llmr-mkmodel" -- "$MK" --help
check "gptoss-ref --help" 0 "usage: llmr-gptoss-ref" -- "$REF" --help
check "unknown preset" 1 "unknown preset 'huge'" -- "$MK" --preset huge --seed 1 --out "$tmp/x"
check "missing seed" 2 "--seed" -- "$MK" --preset tiny --out "$tmp/x"
check "bad seed" 2 "not an unsigned integer" -- "$MK" --preset tiny --seed -4 --out "$tmp/x"
check "unknown option" 2 "unknown option '--frob'" -- "$MK" --frob
check "20b plan = real split" 0 "model-00001-of-00002.safetensors payload 4798679872 bytes" -- "$MK" --preset 20b --seed 1 --dry-run
check "output folder unwritable" 1 "/nonexistent-llmr/out" -- "$MK" --preset tiny --seed 1 --out /nonexistent-llmr/out
check "tiny, 1 thread" 0 "wrote preset tiny seed 9" -- "$MK" --preset tiny --seed 9 --out "$tmp/a" --threads 1
check "tiny, 3 threads" 0 "6 shards" -- "$MK" --preset tiny --seed 9 --out "$tmp/b" --threads 3
same=ok
for f in "$tmp"/a/*; do cmp -s "$f" "$tmp/b/$(basename "$f")" || same="$(basename "$f") differs"; done
[ "$same" = ok ] && echo "ok   same bytes for any thread count" || { echo "FAIL same bytes: $same"; fail=1; }
cmp -s "$tmp/a/chat_template.jinja" tests/data/gptoss/chat_template.jinja && echo "ok   chat_template.jinja shipped" \
  || { echo "FAIL chat_template.jinja missing or different"; fail=1; }
check "another seed differs" 0 "wrote" -- "$MK" --preset tiny --seed 10 --out "$tmp/c" --threads 2
cmp -s "$tmp/a/model-00000-of-00005.safetensors" "$tmp/c/model-00000-of-00005.safetensors" \
  && { echo "FAIL seeds 9 and 10 wrote the same shard"; fail=1; } || echo "ok   another seed, other weights"

# index <-> shard headers, with the standard library only
if command -v python3 >/dev/null; then
  check "index agrees with shard headers" 0 "79 tensors in 6 shards" -- python3 - "$tmp/a" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
seen, total = {}, 0
for fn in sorted(set(idx["weight_map"].values())):
    with open(os.path.join(d, fn), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    for name, t in hdr.items():
        if name == "__metadata__": continue
        assert idx["weight_map"][name] == fn, name
        seen[name] = fn
        total += t["data_offsets"][1] - t["data_offsets"][0]
assert set(seen) == set(idx["weight_map"]), "index and shards list different tensors"
assert total == idx["metadata"]["total_size"], (total, idx["metadata"]["total_size"])
print(f"{len(seen)} tensors in {len(set(seen.values()))} shards, total_size {total}")
PY
fi

check "reference over bad tokens file" 2 "expected a JSON array" -- "$REF" --model "$tmp/a" --tokens "$tmp/a/config.json"
if [ -f "$CACHE/tokenizer-gptoss/tokenizer.json" ] && [ -x "$TOK" ]; then
  "$MK" --preset tiny --seed 9 --out "$tmp/t" --tokenizer-dir "$CACHE/tokenizer-gptoss" >/dev/null || fail=1
  cmp -s "$tmp/t/tokenizer.json" "$CACHE/tokenizer-gptoss/tokenizer.json" && echo "ok   tokenizer.json shipped" || { echo "FAIL tokenizer.json"; fail=1; }
  printf '<|start|>user<|message|>Hello, world!<|end|><|start|>assistant' | "$TOK" --tokenizer "$tmp/t/tokenizer.json" > "$tmp/ids.json"
  check "text -> ids -> C reference" 0 "tokens/s" -- "$REF" --model "$tmp/t" --tokens "$tmp/ids.json" --greedy 8 --threads 2
  ids=$(sed -n 's/^greedy://p' <<<"$out" | sed -E 's/\([^)]*\)//g; s/^ +//; s/ +/,/g')
  text=$(echo "[$ids]" | "$TOK" --tokenizer "$tmp/t/tokenizer.json" --decode --lossy | head -c 200)
  [ -n "$text" ] && echo "ok   greedy ids decode to text ($(printf '%q' "$text" | head -c 60)...)" || { echo "FAIL decode of [$ids]"; fail=1; }
else
  echo "note: no tokenizer fixture in $CACHE (make deps): end-to-end text check skipped"
fi
[ $fail -eq 0 ] && echo "PASS: llmr-mkmodel / llmr-gptoss-ref" || echo "FAIL"
exit $fail
