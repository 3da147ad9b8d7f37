# shellcheck shell=bash
# tests/gpu/ab_common.sh — what the bench A/B scripts share (tests/gpu/decode_ab.sh, tests/gpu/throughput_ab.sh),
# sourced by them after they set AB_TOOL (their name, for messages) and AB_BENCH (the bench they run: decode, throughput):
#   ab_word WORD      takes one word that is not the caller's own option: NAME=ENGINE[:VAR=VALUE...] names an engine
#                     (.so) with environment settings for its runs, any other word is a run (a NAME, in order)
#   ab_check BENCH MODEL
#                     exits 2 with a message unless BENCH is executable, MODEL holds a config.json, a run was named
#                     and every run's engine exists
#   ab_run NAME CMD...
#                     runs CMD with NAME's settings in its environment (timeout 300), its output in $AB_OUT; returns
#                     CMD's status
# and the arrays ENGINE[NAME], SETTINGS[NAME], NAMES (engines in the order named) and RUNS.
declare -A ENGINE SETTINGS
NAMES=() RUNS=()
AB_OUT=$(mktemp)
trap 'rm -f "$AB_OUT" "${AB_RESULTS:-}"' EXIT

ab_word() {
  case "$1" in
    -*) echo "$AB_TOOL: unknown option $1 (see --help)" >&2; exit 2 ;;
    *=*)
      local name=${1%%=*} spec=${1#*=}
      ENGINE[$name]=${spec%%:*}
      SETTINGS[$name]=$([ "$spec" != "${spec#*:}" ] && echo "${spec#*:}" | tr ':' ' ')
      NAMES+=("$name") ;;
    *) RUNS+=("$1") ;;
  esac
}

ab_check() {
  [ -x "$1" ] || { echo "$AB_TOOL: no bench/$AB_BENCH at '$1' (--bench, or source tests/gpu/unpack.sh)" >&2; exit 2; }
  [ -f "$2/config.json" ] || { echo "$AB_TOOL: no checkpoint at '$2' (--model)" >&2; exit 2; }
  [ ${#RUNS[@]} -gt 0 ] || { echo "$AB_TOOL: no runs named (see --help)" >&2; exit 2; }
  local r
  for r in "${RUNS[@]}"; do
    [ -n "${ENGINE[$r]:-}" ] || { echo "$AB_TOOL: run '$r' names no engine (want NAME=ENGINE first)" >&2; exit 2; }
    [ -f "${ENGINE[$r]}" ] || { echo "$AB_TOOL: $r's engine ${ENGINE[$r]} is missing" >&2; exit 2; }
  done
}

ab_run() {
  local name=$1
  shift
  # shellcheck disable=SC2086 # the settings are VAR=VALUE words
  env ${SETTINGS[$name]} timeout 300 "$@" > "$AB_OUT" 2>&1
}
