#!/usr/bin/env bash
# issue 4: a node killed -> offline at the router within 20 s (3 missed heartbeats at the default 5 s),
# and online again when it comes back (same node id from --state-dir, re-registered, heartbeats resume).
# Also: a node started while the router is down keeps retrying its registration until the router
# answers; a router that lost its database answers 401/404 and the node registers again by itself.
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

t0=$(date +%s%N)
kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null
echo "killed at $(date -u +%T.%N)"
wait_for 25 status_is offline || fail "the node is still $(curl -s "$ROUTER/v0/nodes" | jq -r '.data[0].status') 25 s after SIGKILL"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "seen offline at $(date -u +%T.%N); router: $(grep -o 'is offline.*' "$T/router.log" | head -1)"
[ "$ms" -le 20000 ] || fail "offline only after $ms ms"
ok "killed node offline at the router after $ms ms"
curl -s "$ROUTER/v1/models" | jq -e '.data | length == 0' >/dev/null || fail "/v1/models lists models of an offline node"

start_node
wait_for 15 status_is online || fail "the node did not come back online"
[ "$(curl -s "$ROUTER/v0/nodes" | jq -r '.data | length')" = 1 ] || fail "the restarted node registered as a second node"
[ "$(curl -s "$ROUTER/v0/nodes" | jq -r '.data[0].id')" = "$ID1" ] || fail "the node id changed"
ok "restarted node online again as $ID1"

# The router goes down; the node is restarted meanwhile and must keep trying to register.
stop_pid "$ROUTER_PID"
kill "$NODE_PID"; wait "$NODE_PID" 2>/dev/null
rm -rf "$T/node/state"
start_node
sleep 3
grep -q "registration failed" "$T/node.log" || fail "no registration attempt was logged while the router was down"
ROUTER_HEARTBEAT=5 start_router --listen "127.0.0.1:$ROUTER_PORT"
wait_for 40 grep -q "registered with" "$T/node.log" || fail "the node did not register once the router came back"
ok "registration retried with backoff until the router answered ($(grep -c 'registration failed' "$T/node.log") logged failure(s))"

# The router loses its database: the node's token is unknown (401) -> it registers again.
ID2=$(jq -r .node_id "$T/node/state/node.json")
stop_pid "$ROUTER_PID"
rm -rf "$T/router"
ROUTER_HEARTBEAT=5 start_router --listen "127.0.0.1:$ROUTER_PORT"
wait_for 30 status_is online || fail "the node did not re-register with the reset router"
grep -q "registering again" "$T/node.log" || fail "no re-registration was logged"
ok "router database reset -> 401 -> the node registered again (was $ID2, now $(jq -r .node_id "$T/node/state/node.json"))"
echo PASS
