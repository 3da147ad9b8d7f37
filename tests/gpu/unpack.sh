# shellcheck shell=bash
# tests/gpu/unpack.sh — the common start of a GPU call script, sourced from the repository root on the GPU machine:
#
#   . tests/gpu/unpack.sh PKG [--no-model]
#
# PKG is a folder tests/gpu/pack.sh wrote (build.tar.xz, tok.tgz) and the call carried. Unpacks the build into
# $T/B (build/ and any alt/NAME/ engines) and the tokenizer fixtures into $T/cache, T = $LLMR_GPU_TMP or /tmp, then
# writes the full-size synthetic 20b checkpoint (13 GB, ~6 s there) to $T/m20b unless one is there or --no-model.
# Sets and exports:
#   B           $T/B/build (bin/, bench/, engines/, tests/gpu/)
#   EN          this build's engine, $B/engines/gptoss_cuda/libgptoss_cuda.so
#   LLMR_CACHE  $T/cache (llmr-mkmodel and the gate's serving step read the tokenizer there)
#   M20B        $T/m20b
# and SECONDS=0, so that the script can print how long each of its steps took. On failure it says why on stderr and
# returns 1: `. tests/gpu/unpack.sh PKG || exit 1`.
unpack_pkg=${1:-}
if [ -z "$unpack_pkg" ] || [ ! -f "$unpack_pkg/build.tar.xz" ] || [ ! -f "$unpack_pkg/tok.tgz" ]; then
  echo "unpack.sh: want a folder from tests/gpu/pack.sh (build.tar.xz, tok.tgz), got '${unpack_pkg}'" >&2; return 1
fi
unpack_tmp=${LLMR_GPU_TMP:-/tmp}
rm -rf "$unpack_tmp/B" && mkdir -p "$unpack_tmp/B" "$unpack_tmp/cache" || return 1
if ! xz -dc "$unpack_pkg/build.tar.xz" | tar -C "$unpack_tmp/B" -xf -; then
  echo "unpack.sh: cannot unpack $unpack_pkg/build.tar.xz" >&2; return 1
fi
if ! tar xzf "$unpack_pkg/tok.tgz" -C "$unpack_tmp/cache"; then
  echo "unpack.sh: cannot unpack $unpack_pkg/tok.tgz" >&2; return 1
fi
export LLMR_CACHE=$unpack_tmp/cache B=$unpack_tmp/B/build M20B=$unpack_tmp/m20b
export EN=$B/engines/gptoss_cuda/libgptoss_cuda.so
SECONDS=0
if [ "${2:-}" != --no-model ] && [ ! -f "$M20B/config.json" ] &&
   ! "$B/bin/llmr-mkmodel" --preset 20b --seed 1 --out "$M20B" > "$unpack_tmp/mk.log" 2>&1; then
  echo "unpack.sh: llmr-mkmodel failed ($unpack_tmp/mk.log):" >&2; tail -5 "$unpack_tmp/mk.log" >&2; return 1
fi
echo "unpack.sh: build in $B, the 20b in $M20B (${SECONDS}s)"
