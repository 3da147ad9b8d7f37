#!/usr/bin/env bash
# Shared helpers for e2e/test_node_*.sh: a real llmr-hub serving a tiny synthetic gpt-oss model from
# llmr-mkmodel, a real llmr-router (--allow-cpu-nodes, --insecure-no-auth) and llmr-node --gpu none
# with the C reference engine. Every process started here is killed on exit (by pid).
set -uo pipefail
BUILD="${LLMR_BUILD:-$(cd "$(dirname "$0")/.." && pwd)/build}"
BIN="$BUILD/bin"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
T=$(mktemp -d /tmp/llmr-e2e-node-XXXXXX)
PIDS=()
HUB_PORT=""; ROUTER_PORT=""; NODE_PORT=""
REPO="openai/gpt-oss-tiny"

cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  if [ "${KEEP_TMP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT

skip() { echo "SKIP: $*"; exit 77; }
fail() {
  echo "FAIL: $*"
  for f in "$T"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -25 "$f"; }; done
  exit 1
}
ok() { echo "ok: $*"; }

need_bins() {
  for b in llmr-hub llmr-router llmr-node llmr-mkmodel; do
    [ -x "$BIN/$b" ] || skip "$BIN/$b is not built"
  done
  command -v curl >/dev/null || skip "curl is not installed"
  command -v jq >/dev/null || skip "jq is not installed"
}

# The engines the node gets: the C reference gpt-oss engine (CPU) when it is built. Without it, the
# test-only engine fixture (tests/plugins/testengine, which runs no model) is installed under a
# manifest claiming gpt-oss on CPU, so the node side (downloads, verification, validation, states)
# is still exercised end to end; the line printed says which one ran.
setup_engines() {
  ENGINES="$T/engines"
  mkdir -p "$ENGINES"
  if [ -f "$BUILD/engines/gptoss_ref/manifest.json" ]; then
    cp -r "$BUILD/engines/gptoss_ref" "$ENGINES/"
    ENGINE_ID=gptoss_ref
  elif [ -f "$BUILD/tests/plugins/testengine/libtestengine.so" ]; then
    mkdir -p "$ENGINES/testengine"
    cp "$BUILD/tests/plugins/testengine/libtestengine.so" "$ENGINES/testengine/"
    cat >"$ENGINES/testengine/manifest.json" <<'JSON'
{"id": "testengine", "version": "1.0.0", "abi_version": "1.0",
 "description": "e2e stand-in for the C reference engine: the test fixture under a gpt-oss CPU manifest",
 "runtimes": ["gptoss"], "formats": ["safetensors"], "architectures": ["GptOssForCausalLM"],
 "gpu_backends": ["cpu"], "library": "libtestengine.so"}
JSON
    ENGINE_ID=testengine
  else
    skip "neither build/engines/gptoss_ref nor the test engine plugin is built"
  fi
  echo "engine for this run: $ENGINE_ID"
}

# Makes the tiny model once per run under $T/hub/$REPO (same seed, same bytes).
make_model() {
  mkdir -p "$T/hub/$(dirname "$REPO")"
  "$BIN/llmr-mkmodel" --preset tiny --seed "${1:-7}" --out "$T/hub/$REPO" >"$T/mkmodel.log" 2>&1 || fail "llmr-mkmodel failed"
}

# wait_for SECONDS CMD...: polls CMD every 0.2 s until it succeeds.
wait_for() {
  local limit=$1; shift
  local end=$(( $(date +%s%N) + limit * 1000000000 ))
  while [ "$(date +%s%N)" -lt "$end" ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  return 1
}

start_hub() { # start_hub [FAULTS [PORT]]
  rm -f "$T/hub.port"
  local f=(); [ -n "${1:-}" ] && f=(--fault "$1")
  "$BIN/llmr-hub" --root "$T/hub" --listen "127.0.0.1:${2:-0}" --port-file "$T/hub.port" --cache "$T/hubcache" "${f[@]}" \
    >>"$T/hub.log" 2>&1 &
  HUB_PID=$!; PIDS+=($HUB_PID)
  wait_for 30 test -s "$T/hub.port" || fail "llmr-hub did not start"
  HUB_PORT=$(cat "$T/hub.port")
}

stop_pid() { kill "$1" 2>/dev/null; wait "$1" 2>/dev/null; }

router_port_from_log() { sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$T/router.log" | tail -1; }
router_listening() { [ -n "$(router_port_from_log)" ]; }
start_router() { # start_router [extra flags]
  : >"$T/router.log"
  "$BIN/llmr-router" --listen 127.0.0.1:0 --data-dir "$T/router" --hub-endpoint "http://127.0.0.1:$HUB_PORT" \
    --insecure-no-auth --allow-cpu-nodes --heartbeat-interval "${ROUTER_HEARTBEAT:-1}" --sync-interval 30 "$@" \
    >>"$T/router.log" 2>&1 &
  ROUTER_PID=$!; PIDS+=($ROUTER_PID)
  wait_for 30 router_listening || fail "llmr-router did not start"
  ROUTER_PORT=$(router_port_from_log)
  ROUTER="http://127.0.0.1:$ROUTER_PORT"
}

node_port_from_log() { sed -n 's/.*listening on .*(port \([0-9]*\)).*/\1/p' "$T/node.log" | tail -1; }
node_listening() { [ -n "$(node_port_from_log)" ]; }
start_node() { # start_node [extra flags]; the node keeps its state and models across restarts
  : >"$T/node.log"
  mkdir -p "$T/node"
  "$BIN/llmr-node" --router "$ROUTER" --listen 127.0.0.1:0 --gpu none --models-dir "$T/node/models" \
    --state-dir "$T/node/state" --engines-dir "${ENGINES:-$BUILD/engines}" --trace-dir "$T/trace" "$@" >>"$T/node.log" 2>&1 &
  NODE_PID=$!; PIDS+=($NODE_PID)
  wait_for 30 node_listening || fail "llmr-node did not start"
  NODE_PORT=$(node_port_from_log)
  NODE="http://127.0.0.1:$NODE_PORT"
}

register_model() { # register_model REPO -> HTTP status in $REG_STATUS, body in $T/register.json
  REG_STATUS=$(curl -s -o "$T/register.json" -w '%{http_code}' -X POST "$ROUTER/v0/models/register" \
    -H 'Content-Type: application/json' -d "{\"repo\":\"$1\",\"format\":\"safetensors\"}")
}

# The model's state on our node, as the router shows it (GET /v0/models/{repo} -> nodes[]).
router_state() { curl -s "$ROUTER/v0/models/$1" | jq -r '[.nodes[]? | .state] | first // empty'; }
router_reason() { curl -s "$ROUTER/v0/models/$1" | jq -r '[.nodes[]? | .reason // empty] | first // empty'; }
# The model's state in the node's own status.
node_state() { curl -s "$NODE/v0/status" | jq -r --arg id "$1" '.models[] | select(.id == $id) | .state'; }
node_reason() { curl -s "$NODE/v0/status" | jq -r --arg id "$1" '.models[] | select(.id == $id) | .reason // empty'; }
state_is() { [ "$(router_state "$1")" = "$2" ]; }
node_state_is() { [ "$(node_state "$1")" = "$2" ]; }

# Validates every traced message of a kind against a schema with ajv (npm, in the fixture cache),
# through the shared e2e/lib/validate_schema.js.
validate_traces() { # validate_traces KIND SCHEMA
  command -v node >/dev/null || { echo "note: node not installed: schema validation of $1 skipped"; return 0; }
  ls "$T/trace/$1"-[0-9]*.json >/dev/null 2>&1 || fail "no $1 message was traced"
  local f n=0 rc
  for f in "$T/trace/$1"-[0-9]*.json; do
    node "$ROOT/e2e/lib/validate_schema.js" "$ROOT/schema/$2" "$f"; rc=$?
    [ $rc = 77 ] && { echo "note: ajv not installed: schema validation of $1 skipped"; return 0; }
    [ $rc = 0 ] || fail "$f does not match schema/$2"
    n=$((n+1))
  done
  echo "$n $1 message(s) valid against schema/$2"
}
