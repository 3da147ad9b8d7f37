#!/usr/bin/env bash
# e2e: the node join key (--node-join-key / LLMR_NODE_JOIN_KEY on llmr-router, --join-key /
# LLMR_NODE_JOIN_KEY on llmr-node). Without it the router warns that any host can join; with it,
# POST /v0/nodes needs the join key, the admin key or (to re-register itself) a node's own token:
# 401 with none, 403 with any other key; a known node_id is taken over only with the join key, the
# admin key or that node's current token. A real llmr-node joins with the key and is refused without.
set -uo pipefail
cd "$(dirname "$0")/.."
. e2e/lib/router.sh
BIN="${LLMR_BUILD:-$(pwd)/build}/bin"
for t in curl jq; do command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }; done
[ -x "$BIN/llmr-router" ] || { echo "FAIL: build llmr-router first"; exit 1; }

WORK="$(mktemp -d /tmp/llmr-e2e-joinkey.XXXXXX)"
ROUTER_LOG_FILE="$WORK/router.log"
NODE_PIDS=()
cleanup() {
  for p in "${NODE_PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  router_stop; rm -rf "$WORK"
}
trap cleanup EXIT
fails=0
ok()   { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails+1)); }
check() { local what="$1"; shift; if "$@" >/dev/null 2>&1; then ok "$what"; else fail "$what"; fi; }
expect() {
  local code; code=$(echo "$BODY" | jq -r '.error.code // empty' 2>/dev/null)
  if [ "$ST" = "$1" ] && { [ "$2" = "-" ] || [ "$code" = "$2" ]; }; then ok "$3"
  else fail "$3: got $ST $code: $(echo "$BODY" | head -c 400)"; fi
}
jbody() { echo "$BODY" | jq -e "$1" >/dev/null 2>&1; }
HUB=http://127.0.0.1:9   # never contacted: no model is registered here
ADMIN=admin-key-join-0123456789
JOIN=join-key-0123456789abcdef
NODE='{"machine_name":"box","address":"127.0.0.1","port":9,"gpus":[],"engines":[{"id":"e","version":"1","runtimes":["gptoss"],"formats":["safetensors"],"cpu_only":true}]}'
with_id() { echo "$NODE" | jq -c --arg id "$1" '.node_id=$id'; }

# --- flags, help, the warning ------------------------------------------------------------------------
check "llmr-router --help lists --node-join-key" bash -c "'$BIN/llmr-router' --help | grep -q -- --node-join-key"
[ -x "$BIN/llmr-node" ] && check "llmr-node --help lists --join-key" bash -c "'$BIN/llmr-node' --help | grep -q -- --join-key"
"$BIN/llmr-router" --listen 127.0.0.1:0 --data-dir "$WORK/short" --admin-key "$ADMIN" --hub-endpoint "$HUB" \
  --node-join-key tooshort >"$WORK/short.log" 2>&1
rc=$?
check "a short join key is refused at start (exit $rc)" test $rc -ne 0
check "the message names the flag and the limit" grep -q -- "--node-join-key is 8 characters; at least 16" "$WORK/short.log"

router_start "$WORK/open" --admin-key "$ADMIN" --hub-endpoint "$HUB" --allow-cpu-nodes || exit 1
check "without a join key the router warns that any host can join" grep -q "any host that reaches this router can register a node" "$WORK/router.log"
rreq POST /v0/nodes "" "$NODE"; expect 201 - "open router: a node joins without a key (unchanged)"
rreq POST /v0/nodes "$JOIN" "$NODE"; expect 201 - "open router: a node that sends a join key joins too"
router_stop

# --- with a join key ------------------------------------------------------------------------------------
: > "$WORK/router.log"
router_start "$WORK/data" --admin-key "$ADMIN" --hub-endpoint "$HUB" --allow-cpu-nodes --node-join-key "$JOIN" || exit 1
check "no open-joining warning with a join key" bash -c "! grep -q 'any host' '$WORK/router.log'"
rreq POST /v0/nodes "" "$NODE"; expect 401 missing_api_key "no key: 401"
check "the message names --node-join-key" jbody '.error.message|test("--node-join-key")'
HDR=$(curl -s -D - -o /dev/null -X POST -H 'Content-Type: application/json' --data-binary "$NODE" "$ROUTER_URL/v0/nodes")
check "401 carries WWW-Authenticate: Bearer" bash -c "echo '$HDR' | grep -qi '^WWW-Authenticate: Bearer'"
rreq POST /v0/nodes "wrong-key-0123456789abcdef" "$NODE"; expect 403 invalid_join_key "wrong key: 403"
rreq POST /v0/nodes "llmr-node-$(printf '0%.0s' $(seq 64))" "$NODE"; expect 403 invalid_join_key "unknown node token: 403"
rreq POST /v0/api-keys "$ADMIN" '{"name":"client"}'; APIKEY=$(echo "$BODY" | jq -r .key)
rreq POST /v0/nodes "$APIKEY" "$NODE"; expect 403 invalid_join_key "an inference API key does not admit a node: 403"
rreq POST /v0/nodes "$JOIN" "not json"; expect 400 - "join key + malformed body: 400"
rreq POST /v0/nodes "$JOIN" "$NODE"; expect 201 - "the join key admits a node"
A_ID=$(echo "$BODY" | jq -r .node_id); A_TOK=$(echo "$BODY" | jq -r .node_token)
rreq POST /v0/nodes "$ADMIN" "$NODE"; expect 201 - "the admin key admits a node"
B_ID=$(echo "$BODY" | jq -r .node_id); B_TOK=$(echo "$BODY" | jq -r .node_token)
check "two distinct nodes" test "$A_ID" != "$B_ID"

# --- taking over a known node_id -----------------------------------------------------------------------
rreq POST /v0/nodes "" "$(with_id "$A_ID")"; expect 401 missing_api_key "re-register A without a key: 401"
rreq POST /v0/nodes "wrong-key-0123456789abcdef" "$(with_id "$A_ID")"; expect 403 invalid_join_key "re-register A with a wrong key: 403"
rreq POST /v0/nodes "$B_TOK" "$(with_id "$A_ID")"; expect 403 wrong_node "re-register A with B's token: 403"
rreq POST /v0/health "$A_TOK" "{\"node_id\":\"$A_ID\",\"gpus\":[],\"active_requests\":0,\"models\":[]}"
expect 200 - "A's token still works after the refused take-overs"
rreq POST /v0/nodes "$A_TOK" "$(with_id "$A_ID")"; expect 201 - "A re-registers with its own token"
check "keeps its id" jbody ".node_id==\"$A_ID\""
A_TOK2=$(echo "$BODY" | jq -r .node_token)
rreq POST /v0/nodes "$A_TOK" "$(with_id "$A_ID")"; expect 403 invalid_join_key "A's previous token no longer admits it"
rreq POST /v0/nodes "$B_TOK" "$NODE"; expect 201 - "a node token without node_id re-registers its own node"
check "... as itself" jbody ".node_id==\"$B_ID\""
rreq POST /v0/nodes "$JOIN" "$(with_id "$A_ID")"; expect 201 - "the join key re-registers A (a node that lost its token)"
check "keeps A's id" jbody ".node_id==\"$A_ID\""
rreq POST /v0/health "$A_TOK2" "{\"node_id\":\"$A_ID\",\"gpus\":[],\"active_requests\":0,\"models\":[]}"
expect 401 invalid_api_key "A's token from before is revoked"
rreq POST /v0/nodes "$ADMIN" "$(with_id "$B_ID")"; expect 201 - "the admin key re-registers B"
check "keeps B's id" jbody ".node_id==\"$B_ID\""
router_stop

# --- the environment variable, and a real llmr-node ------------------------------------------------------
: > "$WORK/router.log"
LLMR_NODE_JOIN_KEY="$JOIN" router_start "$WORK/data" --admin-key "$ADMIN" --hub-endpoint "$HUB" --allow-cpu-nodes \
  --heartbeat-interval 1 || exit 1
rreq POST /v0/nodes "" "$NODE"; expect 401 missing_api_key "LLMR_NODE_JOIN_KEY sets the key too"
rreq POST /v0/nodes "$JOIN" "$NODE"; expect 201 - "... and admits with it"
if [ ! -x "$BIN/llmr-node" ]; then
  echo "skip real llmr-node checks: $BIN/llmr-node is not built"
else
  start_node() { # start_node NAME [flags]
    local name="$1"; shift
    mkdir -p "$WORK/$name/engines"
    "$BIN/llmr-node" --router "$ROUTER_URL" --listen 127.0.0.1:0 --gpu none --models-dir "$WORK/$name/models" \
      --state-dir "$WORK/$name/state" --engines-dir "$WORK/$name/engines" --heartbeat-interval 1 "$@" \
      >"$WORK/$name.log" 2>&1 &
    NODE_PIDS+=($!)
  }
  # real llmr-node processes only: the hand-made "box" registrations (machine_name box) time out on their own
  online_nodes() { rreq GET /v0/nodes "$ADMIN"; echo "$BODY" | jq '[.data[]|select(.online and .machine_name != "box")]|length'; }
  start_node keyed --join-key "$JOIN"
  LLMR_NODE_JOIN_KEY="$JOIN" start_node envkeyed
  start_node keyless
  start_node wrongkey --join-key "wrong-key-0123456789abcdef"
  for i in $(seq 1 100); do [ "$(online_nodes)" = 2 ] && break; sleep 0.2; done
  check "llmr-node --join-key and LLMR_NODE_JOIN_KEY join: 2 nodes online" test "$(online_nodes)" = 2
  for i in $(seq 1 50); do grep -q "HTTP 403" "$WORK/wrongkey.log" && grep -q "HTTP 401" "$WORK/keyless.log" && break; sleep 0.2; done
  check "llmr-node without the key is refused (401 logged with the router's message)" grep -q "HTTP 401.*--node-join-key" "$WORK/keyless.log"
  check "llmr-node with a wrong key is refused (403 logged)" grep -q "HTTP 403.*join key" "$WORK/wrongkey.log"
  kill "${NODE_PIDS[2]}" "${NODE_PIDS[3]}" 2>/dev/null
  # A keyed node restarted after its token was revoked joins again under its own id with the key.
  ID=$(jq -r .node_id "$WORK/keyed/state/node.json")
  rreq POST /v0/nodes "$JOIN" "$(with_id "$ID")"; expect 201 - "revoke the keyed node's token (take-over with the join key)"
  for i in $(seq 1 100); do grep -q "registering again" "$WORK/keyed.log" && break; sleep 0.1; done
  for i in $(seq 1 50); do [ "$(grep -c 'registered with' "$WORK/keyed.log")" -ge 2 ] && break; sleep 0.1; done
  check "the keyed node re-registers with the key after its token was revoked" test "$(grep -c 'registered with' "$WORK/keyed.log")" -ge 2
  check "... keeping its id" test "$(jq -r .node_id "$WORK/keyed/state/node.json")" = "$ID"
fi

if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; tail -20 "$WORK/router.log"; exit 1; fi
echo "all join key checks passed"
