#!/usr/bin/env bash
# tests/gpu/ncu_durations.sh — the durations of a program's kernels as ncu measures them at real clocks (no clock
# locking, no cache flushing: as they run in the program), averaged per kernel name:
#
#   tests/gpu/ncu_durations.sh [--skip N] [--count N] [--csv FILE] REGEX -- COMMAND...
#   tests/gpu/ncu_durations.sh --summarize FILE
#
# Profiles the launches of kernels whose names match REGEX (ncu -k regex:REGEX) after skipping the first N of them
# (default 240: past a decode bench's warm-up) and at most --count of them (default 240), keeps ncu's CSV in FILE
# (default /tmp/ncu-durations.csv), and prints one line: "NAME COUNT x AVG ns; ..." for each kernel name, as the call
# scripts of docs/performance.md quote them. --summarize prints that line for a CSV written before. Needs ncu (the GPU
# machine has it); exits with ncu's status, 2 on bad arguments.
set -uo pipefail
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
summarize() {
  awk -F'","' '/gpu__time_duration/ { k = $5; sub(/\(.*/, "", k); v = $NF; gsub(/[",]/, "", v); s[k] += v; n[k]++ }
    END { for (k in s) printf "%s %d x %.0f ns; ", k, n[k], s[k] / n[k]; print "" }' "$1"
}
SKIP=240 COUNT=240 CSV=/tmp/ncu-durations.csv
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --summarize)
      if [ $# -lt 2 ] || [ ! -f "$2" ]; then echo "ncu_durations.sh: --summarize wants a CSV file" >&2; exit 2; fi
      summarize "$2"; exit 0 ;;
    --skip) SKIP=${2:?}; shift 2 ;;
    --count) COUNT=${2:?}; shift 2 ;;
    --csv) CSV=${2:?}; shift 2 ;;
    -*) echo "ncu_durations.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 3 ] || [ "$2" != -- ]; then echo "ncu_durations.sh: want REGEX -- COMMAND... (see --help)" >&2; exit 2; fi
REGEX=$1
shift 2
command -v ncu >/dev/null || { echo "ncu_durations.sh: no ncu here (it runs on the GPU machine)" >&2; exit 2; }
ncu --clock-control none --cache-control none -k "regex:$REGEX" --launch-skip "$SKIP" -c "$COUNT" --csv \
  --metrics gpu__time_duration.sum "$@" > "$CSV" 2>&1
rc=$?
summarize "$CSV"
exit $rc
