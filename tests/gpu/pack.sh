#!/usr/bin/env bash
# tests/gpu/pack.sh — packs what the GPU scripts need from this build for a GPU machine that has the runtime
# libraries but no compiler or -dev headers (docs/testing.md, "On the GPU machine"):
#
#   tests/gpu/pack.sh [--build BUILD] [--out DIR] [--alt NAME:TREE]...
#
#   DIR/build.tar.xz  BUILD/{bin,bench,engines,tests/gpu} (default: this tree's build/) as build/, stripped;
#                     with --alt, TREE/build/engines (and TREE/build/tests/gpu where built) too, as alt/NAME/ (an
#                     older or variant engine to run beside this one: bench/decode --engine
#                     /tmp/B/alt/NAME/engines/gptoss_cuda/libgptoss_cuda.so; its kernel checks:
#                     /tmp/B/alt/NAME/tests/gpu/gptoss_kernels). One xz stream with a 256 MiB window, so that
#                     variants of a ~23 MB engine cost ~1 MB each rather than ~4.5 (decompressing needs 256 MiB)
#   DIR/tok.tgz       the tokenizer fixtures tools/fixtures.sh keeps under $LLMR_CACHE (default ~/.cache/llmr:
#                     tokenizer-gptoss, -llama3, -qwen3), which llmr-mkmodel and the serving step read; written
#                     once, kept after
#
# DIR defaults to .gpu/pack (git-ignored). On the GPU machine, from the repository root:
#   mkdir -p /tmp/B /tmp/cache && xz -dc DIR/build.tar.xz | tar -C /tmp/B -xf - && tar xzf DIR/tok.tgz -C /tmp/cache
#   LLMR_CACHE=/tmp/cache tests/gpu/gate.sh --build /tmp/B/build --out /tmp/g
# or, at the start of a call script, `. tests/gpu/unpack.sh DIR || exit 1`, which does the same, writes the full-size
# synthetic 20b to /tmp/m20b and sets B, EN, M20B and LLMR_CACHE (its header says more)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$ROOT/.gpu/pack BUILD=$ROOT/build
ALTS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --alt) ALTS+=("$2"); shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "pack.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v xz >/dev/null || { echo "pack.sh: xz is missing (apt install xz-utils)" >&2; exit 1; }
for d in bin bench engines tests/gpu; do
  [ -d "$BUILD/$d" ] || { echo "pack.sh: $BUILD/$d is missing: build first (make, with nvcc)" >&2; exit 1; }
done
STAGE=$(mktemp -d /tmp/llmr-pack.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/build/tests" "$OUT"
cp -r "$BUILD/bin" "$BUILD/bench" "$BUILD/engines" "$STAGE/build/"
cp -r "$BUILD/tests/gpu" "$STAGE/build/tests/"
for a in "${ALTS[@]}"; do
  name=${a%%:*} tree=${a#*:}
  if [ -z "$name" ] || [ "$name" = "$a" ] || [ ! -d "$tree/build/engines" ]; then
    echo "pack.sh: --alt $a: want NAME:TREE with TREE/build/engines built" >&2
    exit 1
  fi
  mkdir -p "$STAGE/alt/$name"
  cp -r "$tree/build/engines" "$STAGE/alt/$name/"
  if [ -d "$tree/build/tests/gpu" ]; then
    mkdir -p "$STAGE/alt/$name/tests" && cp -r "$tree/build/tests/gpu" "$STAGE/alt/$name/tests/"
  fi
done
# symbols are not needed there, and the device call carries at most 64 MiB
find "$STAGE" -type f \( -perm -u+x -o -name '*.so' \) -exec strip --strip-unneeded {} + 2>/dev/null || true
# one block (-T1): xz's window then spans the near-identical engines and test programs
tar -C "$STAGE" -cf - . | xz -T1 --lzma2=preset=6,dict=256MiB > "$OUT/build.tar.xz"
CACHE=${LLMR_CACHE:-$HOME/.cache/llmr}
if [ ! -f "$OUT/tok.tgz" ]; then
  toks=()
  for t in tokenizer-gptoss tokenizer-llama3 tokenizer-qwen3; do [ -d "$CACHE/$t" ] && toks+=("$t"); done
  if [ ${#toks[@]} -gt 0 ]; then
    tar -C "$CACHE" -czf "$OUT/tok.tgz" "${toks[@]}"
  else
    echo "pack.sh: no tokenizer fixtures under $CACHE (tools/fixtures.sh fetches them); tok.tgz not written" >&2
  fi
fi
ls -l "$OUT"
