#!/usr/bin/env bash
# issue 4: a node killed -> offline at the router within 20 s (3 missed heartbeats at the default 5 s),
# and online again when it comes back (same node id from --state-dir, re-registered, heartbeats resume).
source "$(dirname "$0")/node_lib.sh"
need_bins
setup_engines
mkdir -p "$T/hub"
start_hub
ROUTER_HEARTBEAT=5 start_router
start_node
status_is() { [ "$(curl -s "$ROUTER/v0/nodes" | jq -r '.data[0].status')" = "$1" ]; }
wait_for 15 status_is online || fail "the node never came online"
ID1=$(jq -r .node_id "$T/node/state/node.json")
ok "node $ID1 online (heartbeat every 5 s, the router's setting)"

kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null
t0=$(date +%s)
wait_for 25 status_is offline || fail "the node is still $(curl -s "$ROUTER/v0/nodes" | jq -r '.data[0].status') 25 s after SIGKILL"
dt=$(( $(date +%s) - t0 ))
[ "$dt" -le 20 ] || fail "offline only after $dt s"
ok "killed node offline at the router after $dt s"
curl -s "$ROUTER/v1/models" | jq -e '.data | length == 0' >/dev/null || fail "/v1/models lists models of an offline node"

start_node
wait_for 15 status_is online || fail "the node did not come back online"
[ "$(curl -s "$ROUTER/v0/nodes" | jq -r '.data | length')" = 1 ] || fail "the restarted node registered as a second node"
[ "$(curl -s "$ROUTER/v0/nodes" | jq -r '.data[0].id')" = "$ID1" ] || fail "the node id changed"
ok "restarted node online again as $ID1"
echo PASS
