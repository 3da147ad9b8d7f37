#!/usr/bin/env bash
# tests/gpu/decode_ab.sh — an A/B of batch-1 decode engines on the GPU machine: bench/decode once per named run, in
# the order given, then each engine's mean step time and its change against the first engine named:
#
#   tests/gpu/decode_ab.sh [--bench FILE] [--model DIR] [--contexts LIST] [--tokens N] [--log FILE] \
#       NAME=ENGINE[:VAR=VALUE...]... RUN...
#
# NAME=ENGINE names an engine (.so), with environment settings for its runs (NAME=ENGINE:LLMR_GPTOSS_DOWN_R4=0 runs
# the same engine another way); each RUN is one of those NAMEs, so `a=X b=Y a b b a` interleaves them against drift.
# Defaults: --bench $B/bench/decode, --model $M20B (both set by tests/gpu/unpack.sh), --contexts 128,1024,
# --tokens 256, --log /tmp/decode-ab.txt (every run's full output, after a "== NAME" line).
# Prints a line per run (tok/s and roofline share per context, the "decode step ... ms GPU" time, which spreads
# far less between runs than tok/s) and a table of the means. Exits 1 if a run fails, 2 on bad arguments.
set -uo pipefail
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
BENCH=${B:-}/bench/decode MODEL=${M20B:-} CONTEXTS=128,1024 TOKENS=256 LOG=/tmp/decode-ab.txt
declare -A ENGINE SETTINGS
NAMES=() RUNS=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --bench) BENCH=${2:?}; shift 2 ;;
    --model) MODEL=${2:?}; shift 2 ;;
    --contexts) CONTEXTS=${2:?}; shift 2 ;;
    --tokens) TOKENS=${2:?}; shift 2 ;;
    --log) LOG=${2:?}; shift 2 ;;
    -*) echo "decode_ab.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *=*)
      name=${1%%=*} spec=${1#*=}
      ENGINE[$name]=${spec%%:*}
      SETTINGS[$name]=$([ "$spec" != "${spec#*:}" ] && echo "${spec#*:}" | tr ':' ' ')
      NAMES+=("$name"); shift ;;
    *) RUNS+=("$1"); shift ;;
  esac
done
[ -x "$BENCH" ] || { echo "decode_ab.sh: no bench/decode at '$BENCH' (--bench, or source tests/gpu/unpack.sh)" >&2; exit 2; }
[ -f "$MODEL/config.json" ] || { echo "decode_ab.sh: no checkpoint at '$MODEL' (--model)" >&2; exit 2; }
[ ${#RUNS[@]} -gt 0 ] || { echo "decode_ab.sh: no runs named (see --help)" >&2; exit 2; }
for r in "${RUNS[@]}"; do
  [ -n "${ENGINE[$r]:-}" ] || { echo "decode_ab.sh: run '$r' names no engine (want NAME=ENGINE first)" >&2; exit 2; }
  [ -f "${ENGINE[$r]}" ] || { echo "decode_ab.sh: $r's engine ${ENGINE[$r]} is missing" >&2; exit 2; }
done
: > "$LOG"
RESULTS=$(mktemp)
trap 'rm -f "$RESULTS" "$RESULTS.out"' EXIT
status=0
for r in "${RUNS[@]}"; do
  # shellcheck disable=SC2086 # the settings are VAR=VALUE words
  env ${SETTINGS[$r]} timeout 120 "$BENCH" --engine "${ENGINE[$r]}" --model "$MODEL" --contexts "$CONTEXTS" \
    --tokens "$TOKENS" > "$RESULTS.out" 2>&1
  rc=$?
  [ $rc -eq 0 ] || status=1
  { echo "== $r"; cat "$RESULTS.out"; } >> "$LOG"
  # the table's rows: context, prefill, decode t/s, ..., % roofline; then "context N: a token ... decode step X ms GPU"
  echo "$r rc=$rc: $(awk '$1 ~ /^[0-9]+$/ && NF >= 9 { printf "%s: %s (%s) ", $1, $3, $NF }
    /^context [0-9]+: a token/ { printf "step %s ", $10 }' "$RESULTS.out")"
  awk -v n="$r" '/^context [0-9]+: a token/ { c = $2; sub(/:/, "", c); print n, c, $10 }' "$RESULTS.out" >> "$RESULTS"
done
echo "mean decode step, ms GPU (change against ${NAMES[0]}):"
awk -v first="${NAMES[0]}" -v order="${NAMES[*]}" '
  { s[$1, $2] += $3; n[$1, $2]++; if (!($2 in seen)) { seen[$2] = 1; ctx[++nc] = $2 } }
  END {
    printf "%-12s", "engine"; for (i = 1; i <= nc; i++) printf " %16s", ctx[i] " keys"; print ""
    k = split(order, names, " ")
    for (j = 1; j <= k; j++) {
      e = names[j]; printf "%-12s", e
      for (i = 1; i <= nc; i++) {
        c = ctx[i]
        if (!n[e, c]) { printf " %16s", "-"; continue }
        m = s[e, c] / n[e, c]; b = n[first, c] ? s[first, c] / n[first, c] : 0
        if (e == first || !b) printf " %16s", sprintf("%.4f", m)
        else printf " %16s", sprintf("%.4f %+.2f%%", m, 100 * (m - b) / b)
      }
      printf "  (%d runs)\n", n[e, ctx[1]]
    }
  }' "$RESULTS"
exit $status
