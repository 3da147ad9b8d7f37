#!/usr/bin/env bash
# Installs what llmr needs to build and test, only where it is missing:
# Debian packages (apt) and the npm test fixtures (cached under $LLMR_CACHE, never committed).
set -euo pipefail
APT_PKGS="build-essential libevent-dev libjansson-dev libcurl4-openssl-dev libssl-dev libsqlite3-dev
libpcre2-dev check pkg-config clang libclang-rt-14-dev curl jq nodejs npm wrk xz-utils"
missing=()
for p in $APT_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  # node/npm may come from elsewhere (e.g. a preinstalled nodejs): do not fight it.
  if command -v node >/dev/null && command -v npm >/dev/null; then
    missing=($(printf '%s\n' "${missing[@]}" | grep -vx -e nodejs -e npm || true))
  fi
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
exec "$(dirname "$0")/fixtures.sh"
