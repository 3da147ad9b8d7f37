#!/usr/bin/env bash
# Tokenizer benchmark: llmr next to @lenml/tokenizers and Hugging Face tokenizers (its npm binding
# from the fixture cache, and the python package where installed, e.g. on the GPU machine) on the
# same generated 10 MB mixed corpus. Run from the repository root after `make`.
#   bench/tokenizer/run.sh [SIZE_BYTES]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${LLMR_BUILD:-build}"
CACHE="${LLMR_CACHE:-$HOME/.cache/llmr}"
TOK="$CACHE/tokenizer-gptoss"
corpus=$(mktemp /tmp/llmr-tok-corpus-XXXXXX.txt)
trap 'rm -f "$corpus"' EXIT
"$BUILD/bench/tokenizer" --size "${1:-10485760}" --write-corpus "$corpus"
"$BUILD/bench/tokenizer" --corpus "$corpus" --tokenizer "$TOK/tokenizer.json"
if command -v node >/dev/null && [ -d "$CACHE/npm/node_modules/@lenml/tokenizers" ]; then
  NODE_PATH="$CACHE/npm/node_modules" node bench/tokenizer/lenml_bench.js "$corpus" "$TOK"
else
  echo "lenml: skipped (node or @lenml/tokenizers missing; run make deps)"
fi
if command -v node >/dev/null && [ -d "$CACHE/npm/node_modules/tokenizers" ]; then
  NODE_PATH="$CACHE/npm/node_modules" node bench/tokenizer/hf_node_bench.js "$corpus" "$TOK/tokenizer.json" --rounds 1
else
  echo "hf_node: skipped (npm tokenizers missing; run make deps)"
fi
if python3 -c "import tokenizers" 2>/dev/null; then
  python3 bench/tokenizer/hf_tokenizers.py "$corpus" "$TOK/tokenizer.json" --llmr-tokenize "$BUILD/bin/llmr-tokenize"
else
  echo "hf: skipped (python tokenizers not installed here; run on the GPU machine)"
fi
