#!/usr/bin/env bash
# router/dashboard/gen_page.sh — turns router/dashboard/index.html into router/dashboard/page.c (the
# page as one C string, compiled into llmr-router with no build rule of its own).
#   router/dashboard/gen_page.sh          rewrite page.c
#   router/dashboard/gen_page.sh --check  exit 1 when page.c is not what index.html gives
# Each line becomes one "...\n" literal; backslash, double quote, tab and '?' (trigraphs) are escaped.
set -euo pipefail
dir="$(cd "$(dirname "$0")" && pwd)"
gen() {
  echo '/* page.c — GENERATED from router/dashboard/index.html by router/dashboard/gen_page.sh; do not edit. */'
  echo '#include "router/dashboard/page.h"'
  echo
  echo 'const char router_dashboard_page[] ='
  LC_ALL=C sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/?/\\?/g' -e 's/\t/\\t/g' -e 's/^/    "/' -e 's/$/\\n"/' "$dir/index.html"
  echo '    ;'
  echo 'const size_t router_dashboard_page_len = sizeof router_dashboard_page - 1;'
}
if [ "${1:-}" = --check ]; then
  diff -q <(gen) "$dir/page.c" >/dev/null || { echo "router/dashboard/page.c is stale: run router/dashboard/gen_page.sh" >&2; exit 1; }
  exit 0
fi
gen > "$dir/page.c.tmp" && mv "$dir/page.c.tmp" "$dir/page.c"
