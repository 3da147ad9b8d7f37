# shellcheck shell=bash
# shellcheck disable=SC2034 # BENCH, MODEL, LOG, AB_SHIFT and AB_RESULTS are the sourcing script's
# tests/gpu/ab_common.sh — what the bench A/B scripts share (tests/gpu/decode_ab.sh, tests/gpu/throughput_ab.sh),
# sourced by them after they set AB_TOOL (their name, for messages) and AB_BENCH (the bench they run: decode, throughput):
#   ab_arg ARGS...    takes the first of ARGS that is not the caller's own option and sets AB_SHIFT to the words it
#                     used: -h / --help (the caller's usage, then exit 0), --bench FILE, --model DIR and --log FILE (into
#                     BENCH, MODEL and LOG, whose defaults the caller set), NAME=ENGINE[:VAR=VALUE...] (an engine, .so,
#                     with environment settings for its runs) or a run (a NAME, in order)
#   ab_start          exits 2 with a message unless BENCH is executable, MODEL holds a config.json, a run was named
#                     and every run's engine exists; then empties LOG and makes AB_RESULTS, a scratch file
#   ab_run NAME CMD...
#                     runs CMD with NAME's settings in its environment (timeout 300), its output in $AB_OUT; returns
#                     CMD's status
# and the arrays ENGINE[NAME], SETTINGS[NAME], NAMES (engines in the order named) and RUNS.
declare -A ENGINE SETTINGS
NAMES=() RUNS=()
AB_OUT=$(mktemp)
trap 'rm -f "$AB_OUT" "${AB_RESULTS:-}"' EXIT

ab_arg() {
  AB_SHIFT=1
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --bench|--model|--log)
      [ $# -ge 2 ] || { echo "$AB_TOOL: $1 wants a value" >&2; exit 2; }
      case "$1" in --bench) BENCH=$2 ;; --model) MODEL=$2 ;; --log) LOG=$2 ;; esac
      AB_SHIFT=2 ;;
    -*) echo "$AB_TOOL: unknown option $1 (see --help)" >&2; exit 2 ;;
    *=*)
      local name=${1%%=*} spec=${1#*=}
      ENGINE[$name]=${spec%%:*}
      SETTINGS[$name]=$([ "$spec" != "${spec#*:}" ] && echo "${spec#*:}" | tr ':' ' ')
      NAMES+=("$name") ;;
    *) RUNS+=("$1") ;;
  esac
}

ab_start() {
  [ -x "$BENCH" ] || { echo "$AB_TOOL: no bench/$AB_BENCH at '$BENCH' (--bench, or source tests/gpu/unpack.sh)" >&2; exit 2; }
  [ -f "$MODEL/config.json" ] || { echo "$AB_TOOL: no checkpoint at '$MODEL' (--model)" >&2; exit 2; }
  [ ${#RUNS[@]} -gt 0 ] || { echo "$AB_TOOL: no runs named (see --help)" >&2; exit 2; }
  local r
  for r in "${RUNS[@]}"; do
    [ -n "${ENGINE[$r]:-}" ] || { echo "$AB_TOOL: run '$r' names no engine (want NAME=ENGINE first)" >&2; exit 2; }
    [ -f "${ENGINE[$r]}" ] || { echo "$AB_TOOL: $r's engine ${ENGINE[$r]} is missing" >&2; exit 2; }
  done
  : > "$LOG"
  AB_RESULTS=$(mktemp)
}

ab_run() {
  local name=$1
  shift
  # shellcheck disable=SC2086 # the settings are VAR=VALUE words
  env ${SETTINGS[$name]} timeout 300 "$@" > "$AB_OUT" 2>&1
}
