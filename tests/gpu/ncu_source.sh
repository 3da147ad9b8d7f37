#!/usr/bin/env bash
# tests/gpu/ncu_source.sh — one launch of a kernel profiled with ncu's source counters as it runs in a program (real
# clocks, caches as the program leaves them), exported line by line for tests/gpu/stall_regions.py:
#
#   tests/gpu/ncu_source.sh [--skip N] [--out DIR] NAME REGEX -- COMMAND...
#
# Profiles the first launch whose demangled name matches REGEX after skipping N of them (default 240: past a decode
# bench's warm-up) with `--set full`, and writes DIR/NAME-source.csv.xz (the SASS page: every instruction with its
# executions and its warp-state samples by stall reason), DIR/NAME-details.txt (the report's details page),
# DIR/NAME.ncu-rep.xz and DIR/NAME-ncu.log (DIR defaults to $OUT, else the current directory). Then prints the stall
# summary (stall_regions.py --top 12). Session 47 read the T = 1 kernels this way (performance.md). Needs ncu (the
# GPU machine has it); exits with ncu's status, 2 on bad arguments.
set -uo pipefail
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
SKIP=240 DIR=${OUT:-.}
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --skip) SKIP=${2:?}; shift 2 ;;
    --out) DIR=${2:?}; shift 2 ;;
    -*) echo "ncu_source.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 4 ] || [ "$3" != -- ]; then echo "ncu_source.sh: want NAME REGEX -- COMMAND... (see --help)" >&2; exit 2; fi
NAME=$1 REGEX=$2
shift 3
case "$NAME" in *[!A-Za-z0-9_.-]*|'') echo "ncu_source.sh: NAME '$NAME' is not a plain file name" >&2; exit 2 ;; esac
command -v ncu >/dev/null || { echo "ncu_source.sh: no ncu here (it runs on the GPU machine)" >&2; exit 2; }
mkdir -p "$DIR" || exit 2
TMP=$(mktemp -d /tmp/ncu-source-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
ncu --set full --import-source no --cache-control none --clock-control none --kernel-name-base demangled \
  -k "regex:$REGEX" --launch-skip "$SKIP" -c 1 -o "$TMP/r" "$@" > "$DIR/$NAME-ncu.log" 2>&1
rc=$?
if [ ! -f "$TMP/r.ncu-rep" ]; then
  echo "ncu_source.sh: ncu wrote no report (rc $rc; no launch matched '$REGEX'?): see $DIR/$NAME-ncu.log" >&2
  exit $(( rc ? rc : 1 ))
fi
ncu -i "$TMP/r.ncu-rep" --page source --csv --print-source sass > "$TMP/src.csv" || exit 1
ncu -i "$TMP/r.ncu-rep" --page details > "$DIR/$NAME-details.txt" 2>&1
xz -9 -c "$TMP/src.csv" > "$DIR/$NAME-source.csv.xz" && xz -9 -c "$TMP/r.ncu-rep" > "$DIR/$NAME.ncu-rep.xz"
"$(dirname "$0")/stall_regions.py" --top 12 "$TMP/src.csv"
exit $rc
