#!/usr/bin/env bash
# tests/gpu/pack.sh as a developer meets it: --help, bad arguments named, then a pack of this build with an
# alternative engine and its kernel tests and a tokenizer fixture, unpacked as on the GPU machine, whose stripped
# kernel checks still run (gptoss_kernels --host-checks needs no GPU). Skipped (77) where nvcc did not build the GPU
# programs.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD="${LLMR_BUILD:-build}"
PACK=tests/gpu/pack.sh
if [ ! -x "$BUILD/tests/gpu/gptoss_kernels" ] || [ ! -f "$BUILD/engines/gptoss_cuda/libgptoss_cuda.so" ]; then
  echo "SKIP: no GPU programs in $BUILD (built without nvcc)"; exit 77
fi
command -v xz >/dev/null || { echo "SKIP: no xz here (tools/deps.sh installs xz-utils)"; exit 77; }
tmp=$(mktemp -d /tmp/llmr-pack-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
. e2e/lib/check.sh

check "--help" 0 "pack.sh [--build BUILD] [--out DIR]" -- "$PACK" --help
check "unknown option" 2 "unknown option --frob" -- "$PACK" --frob
check "bad --alt" 1 "want NAME:TREE" -- "$PACK" --build "$BUILD" --out "$tmp/p" --alt nocolon
check "build missing" 1 "$tmp/none/bin is missing" -- "$PACK" --build "$tmp/none" --out "$tmp/p"
mkdir -p "$tmp/cache/tokenizer-gptoss" "$tmp/alt/build" && echo '{}' > "$tmp/cache/tokenizer-gptoss/tokenizer.json"
cp -r "$BUILD/engines" "$tmp/alt/build/"
mkdir -p "$tmp/alt/build/tests" && cp -r "$BUILD/tests/gpu" "$tmp/alt/build/tests/"
check "pack" 0 "build.tar.xz" -- env LLMR_CACHE="$tmp/cache" "$PACK" --build "$BUILD" --out "$tmp/p" --alt old:"$tmp/alt"
mkdir -p "$tmp/B" "$tmp/c"
if xz -dc "$tmp/p/build.tar.xz" | tar -C "$tmp/B" -xf - && tar xzf "$tmp/p/tok.tgz" -C "$tmp/c"; then
  for f in build/engines/gptoss_cuda/libgptoss_cuda.so build/tests/gpu/gptoss_kernels build/tests/gpu/gptoss_batching \
           build/bin/llmr-mkmodel build/bench/throughput alt/old/engines/gptoss_cuda/libgptoss_cuda.so \
           alt/old/tests/gpu/gptoss_kernels; do
    [ -f "$tmp/B/$f" ] || { echo "FAIL unpacked: $f missing"; fail=1; }
  done
  [ -f "$tmp/c/tokenizer-gptoss/tokenizer.json" ] || { echo "FAIL unpacked: the tokenizer fixture is missing"; fail=1; }
  check "unpacked kernel checks run" 0 " 0 failed" -- "$tmp/B/build/tests/gpu/gptoss_kernels" --host-checks
  # tests/gpu/unpack.sh, the start every GPU call script sources: a bad folder named, then the same pack unpacked
  check "unpack.sh bad folder" 1 "want a folder from tests/gpu/pack.sh" -- bash -c '. tests/gpu/unpack.sh /nonexistent'
  # shellcheck disable=SC2016 # expanded by the inner shell, after unpack.sh has set them
  check "unpack.sh" 0 "unpack ok" -- env LLMR_GPU_TMP="$tmp/u" bash -c '. tests/gpu/unpack.sh "$1" --no-model &&
    [ -x "$B/tests/gpu/gptoss_kernels" ] && [ -f "$EN" ] && [ -f "$LLMR_CACHE/tokenizer-gptoss/tokenizer.json" ] &&
    [ "$M20B" = "$LLMR_GPU_TMP/m20b" ] && [ ! -e "$M20B" ] && echo "unpack ok"' unpack "$tmp/p"
else
  echo "FAIL unpack"; fail=1
fi
exit $fail
