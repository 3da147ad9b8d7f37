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
AB_TOOL=decode_ab.sh AB_BENCH=decode
# shellcheck source=tests/gpu/ab_common.sh
. "$(dirname "$0")/ab_common.sh"
while [ $# -gt 0 ]; do
  case "$1" in
    --contexts) CONTEXTS=${2:?}; shift 2 ;;
    --tokens) TOKENS=${2:?}; shift 2 ;;
    *) ab_arg "$@"; shift "$AB_SHIFT" ;;
  esac
done
ab_start
RESULTS=$AB_RESULTS
status=0
for r in "${RUNS[@]}"; do
  ab_run "$r" "$BENCH" --engine "${ENGINE[$r]}" --model "$MODEL" --contexts "$CONTEXTS" --tokens "$TOKENS"
  rc=$?
  [ $rc -eq 0 ] || status=1
  { echo "== $r"; cat "$AB_OUT"; } >> "$LOG"
  # the table's rows: context, prefill, decode t/s, ..., % roofline; then "context N: a token ... decode step X ms GPU"
  echo "$r rc=$rc: $(awk '$1 ~ /^[0-9]+$/ && NF >= 9 { printf "%s: %s (%s) ", $1, $3, $NF }
    /^context [0-9]+: a token/ { printf "step %s ", $10 }' "$AB_OUT")"
  awk -v n="$r" '/^context [0-9]+: a token/ { c = $2; sub(/:/, "", c); print n, c, $10 }' "$AB_OUT" >> "$RESULTS"
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
