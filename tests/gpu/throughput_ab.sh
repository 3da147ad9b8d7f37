#!/usr/bin/env bash
# tests/gpu/throughput_ab.sh — an A/B of batched-decode engines or settings on the GPU machine: bench/throughput once
# per named run, in the order given, then each engine's means and their change against the first engine named:
#
#   tests/gpu/throughput_ab.sh [--bench FILE] [--model DIR] [--streams LIST] [--log FILE] \
#       NAME=ENGINE[:VAR=VALUE...]... RUN...
#
# NAME=ENGINE names an engine (.so), with environment settings for its runs (e5at32=$EN:LLMR_GPTOSS_MOE_E5_MIN_ROWS=32
# runs the same engine another way); each RUN is one of those NAMEs, so `a=X b=Y a b b a` interleaves them against
# drift. Defaults: --bench $B/bench/throughput, --model $M20B (both set by tests/gpu/unpack.sh), --streams 2,8,32,64,
# --log /tmp/throughput-ab.txt (every run's full output, after a "== NAME" line).
# Prints a line per run (out tok/s / step tok/s per stream count), then the means of the step rate and of out tok/s
# per stream count, and the mean GPU time of each bucket of steps by rows (the scheduler's table under the bench's:
# "rows 32-63 ... ms/step"), which depends far less than the rates on which requests the run's streams drew. Exits 1
# if a run fails, 2 on bad arguments.
set -uo pipefail
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
BENCH=${B:-}/bench/throughput MODEL=${M20B:-} STREAMS=2,8,32,64 LOG=/tmp/throughput-ab.txt
AB_TOOL=throughput_ab.sh AB_BENCH=throughput
# shellcheck source=tests/gpu/ab_common.sh
. "$(dirname "$0")/ab_common.sh"
while [ $# -gt 0 ]; do
  case "$1" in
    --streams) STREAMS=${2:?}; shift 2 ;;
    *) ab_arg "$@"; shift "$AB_SHIFT" ;;
  esac
done
ab_start
status=0
for r in "${RUNS[@]}"; do
  ab_run "$r" "$BENCH" --engine "${ENGINE[$r]}" --model "$MODEL" --streams "$STREAMS"
  rc=$?
  [ $rc -eq 0 ] || status=1
  { echo "== $r"; cat "$AB_OUT"; } >> "$LOG"
  # the bench's rows: streams, prompt, output, wall, out tok/s, ITL p50, ITL p99, step t/s, GB/step, roofline, % roof;
  # under them, per stream count "C streams, wall ...", then its buckets: rows, steps, mean rows, ms/step, GPU s. The
  # figures go to AB_RESULTS, the run's line to stdout.
  echo "$r rc=$rc: $(awk -v n="$r" -v out="$AB_RESULTS" '
    NF == 11 && $1 ~ /^[0-9]+$/ && $11 ~ /%$/ { print "R", n, $1, $8, $5 >> out; line = line sprintf("%s: %s / %s; ", $1, $5, $8) }
    / streams, wall / { c = $1 }
    c && NF == 5 && $1 ~ /^[0-9]+(-[0-9]+)?$/ && $2 ~ /^[0-9]+$/ { print "B", n, c, $1, $4, $2 >> out }
    END { print line }' "$AB_OUT")"
done
awk -v first="${NAMES[0]}" -v order="${NAMES[*]}" '
  function cell(m, b, fmt) { return b && e != first ? sprintf(fmt " %+.1f%%", m, 100 * (m - b) / b) : sprintf(fmt, m) }
  $1 == "R" { st[$2, $3] += $4; ot[$2, $3] += $5; nr[$2, $3]++; if (!($3 in sseen)) { sseen[$3] = 1; cs[++ncs] = $3 } }
  $1 == "B" { k = $3 SUBSEP $4; ms[$2, k] += $5; nb[$2, k]++; if (!(k in bseen)) { bseen[k] = 1; bk[++nbk] = k } }
  END {
    k = split(order, names, " ")
    print "mean step tok/s / out tok/s by streams (change against " first "):"
    printf "%-12s", "engine"; for (i = 1; i <= ncs; i++) printf " %30s", cs[i] " streams"; print ""
    for (j = 1; j <= k; j++) {
      e = names[j]; printf "%-12s", e
      for (i = 1; i <= ncs; i++) {
        c = cs[i]
        if (!nr[e, c]) { printf " %30s", "-"; continue }
        n = nr[e, c]; b = nr[first, c]
        printf " %30s", cell(st[e, c] / n, b ? st[first, c] / b : 0, "%.1f") " / " cell(ot[e, c] / n, b ? ot[first, c] / b : 0, "%.1f")
      }
      printf "  (%d runs)\n", nr[e, cs[1]]
    }
    print "mean ms per step, by stream count and rows per step:"
    printf "%-16s", "streams: rows"; for (j = 1; j <= k; j++) printf " %16s", names[j]; print ""
    for (i = 1; i <= nbk; i++) {
      q = bk[i]; split(q, p, SUBSEP); printf "%-16s", p[1] ": " p[2]
      for (j = 1; j <= k; j++) {
        e = names[j]
        if (!nb[e, q]) { printf " %16s", "-"; continue }
        printf " %16s", cell(ms[e, q] / nb[e, q], nb[first, q] ? ms[first, q] / nb[first, q] : 0, "%.2f")
      }
      print ""
    }
  }' "$AB_RESULTS"
exit $status
