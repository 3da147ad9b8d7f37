#!/usr/bin/env bash
# Conformance of llmr-tokenize with @lenml/tokenizers (transformers.js port, run under node) on the
# committed corpus (tests/data/tokenizer) plus a 300 KB generated mixed corpus, in both special-token
# modes; and, where the two are known to disagree, with Hugging Face semantics
# (tests/data/tokenizer/hf_semantics.jsonl says which was right and why). Also checks --decode,
# --help and the error paths of the CLI.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${LLMR_BUILD:-build}"
CACHE="${LLMR_CACHE:-$HOME/.cache/llmr}"
BIN="$BUILD/bin/llmr-tokenize"
TOK="$CACHE/tokenizer-gptoss"
export NODE_PATH="$CACHE/npm/node_modules"

[ -x "$BIN" ] || { echo "SKIP: $BIN not built (run make)"; exit 77; }
[ -s "$TOK/tokenizer.json" ] || { echo "SKIP: $TOK/tokenizer.json missing (run make deps)"; exit 77; }
command -v node >/dev/null || { echo "SKIP: node not installed"; exit 77; }
[ -d "$NODE_PATH/@lenml/tokenizers" ] || { echo "SKIP: @lenml/tokenizers not cached (run make deps)"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# CLI basics.
"$BIN" --help | grep -q -- "--no-special" || { echo "FAIL: --help"; fail=1; }
"$BIN" >/dev/null 2>&1 </dev/null; [ $? -eq 2 ] || { echo "FAIL: missing --tokenizer must exit 2"; fail=1; }
out=$("$BIN" --tokenizer /nonexistent.json 2>&1 </dev/null); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "/nonexistent.json" || { echo "FAIL: bad path: rc=$rc $out"; fail=1; }
got=$(printf 'hello <|endoftext|> world' | "$BIN" --tokenizer "$TOK/tokenizer.json")
[ "$got" = "[24912,220,199999,2375]" ] || { echo "FAIL: encode got $got"; fail=1; }
got=$(printf 'hello <|endoftext|> world' | "$BIN" --tokenizer "$TOK/tokenizer.json" --no-special)
case "$got" in *199999*) echo "FAIL: --no-special matched a special token: $got"; fail=1 ;; esac
printf '[24912,220,199999,2375]' | "$BIN" --tokenizer "$TOK/tokenizer.json" --decode > "$tmp/dec"
[ "$(cat "$tmp/dec")" = "hello <|endoftext|> world" ] || { echo "FAIL: decode"; fail=1; }
printf '[24912,999999]' | "$BIN" --tokenizer "$TOK/tokenizer.json" --decode >/dev/null 2>"$tmp/err"
grep -q "999999" "$tmp/err" || { echo "FAIL: unknown id not reported"; fail=1; }
printf '[1,' | "$BIN" --tokenizer "$TOK/tokenizer.json" --decode >/dev/null 2>&1 && { echo "FAIL: bad JSON accepted"; fail=1; }
printf 'ok\xff' | "$BIN" --tokenizer "$TOK/tokenizer.json" --strict-utf8 >/dev/null 2>&1 && { echo "FAIL: --strict-utf8 accepted invalid UTF-8"; fail=1; }

# A 300 KB generated mixed corpus (the bench's generator, smaller) joins the committed one.
extra=()
if [ -x "$BUILD/bench/tokenizer" ]; then
  "$BUILD/bench/tokenizer" --size 300000 --write-corpus "$tmp/mixed.txt" >/dev/null && extra=("$tmp/mixed.txt")
fi
node e2e/tokenizer/conformance.js "$BIN" "$TOK" tests/data/tokenizer "${extra[@]}" || fail=1

# Other tokenizer.json shapes (tools/fixtures.sh caches them): Llama 3 (Split + ByteLevel, legacy
# "a b" merges, 256 added tokens) must tokenize exactly like HF; Qwen 3 (NFC normalizer) must be
# refused at load with "unsupported component: normalizer NFC".
if [ -s "$CACHE/tokenizer-llama3/tokenizer.json" ]; then
  echo "--- llama3"
  node e2e/tokenizer/conformance.js "$BIN" "$CACHE/tokenizer-llama3" tests/data/tokenizer | grep -v '^hf-semantics "' || fail=1
else
  echo "note: $CACHE/tokenizer-llama3 not cached (make deps); Llama 3 check not run"
fi
if [ -s "$CACHE/tokenizer-qwen3/tokenizer.json" ]; then
  out=$(printf 'x' | "$BIN" --tokenizer "$CACHE/tokenizer-qwen3/tokenizer.json" 2>&1); rc=$?
  if [ $rc -eq 1 ] && echo "$out" | grep -q "unsupported component: normalizer NFC"; then echo "qwen3: refused as expected ($out)"
  else echo "FAIL: qwen3 tokenizer.json: rc=$rc $out"; fail=1; fi
else
  echo "note: $CACHE/tokenizer-qwen3 not cached (make deps); Qwen 3 check not run"
fi
[ $fail -eq 0 ] && echo "PASS" || echo "FAIL"
exit $fail
