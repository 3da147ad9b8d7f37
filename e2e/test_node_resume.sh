#!/usr/bin/env bash
# issue 4: a download killed midway resumes and ends byte-identical. The hub drops every transfer of
# the largest shard halfway (so it arrives slowly, in pieces); the node is killed with SIGKILL while
# NAME.partial holds part of it, the hub comes back healthy on the same port, the node is started
# again: it must resume from the partial (Range), not start over, and end with the hub's exact bytes.
# The restarted node also keeps its node id (state dir) and re-verifies the files already on disk.
source "$(dirname "$0")/node_lib.sh"
need_bins
setup_engines
make_model
S5=model-00005-of-00005.safetensors
start_hub "drop:$REPO/$S5"
start_router
start_node
wait_for 15 grep -q "registered with" "$T/node.log" || fail "the node did not register"
ID1=$(jq -r .node_id "$T/node/state/node.json")
register_model "$REPO"
[ "$REG_STATUS" = 201 ] || fail "registration answered $REG_STATUS"
PART="$T/node/models/$REPO/$S5.partial"
has_partial() { [ -s "$PART" ]; }
wait_for 60 has_partial || fail "no partial download of $S5 appeared"
kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null
N=$(stat -c %s "$PART")
FULL=$(stat -c %s "$T/hub/$REPO/$S5")
[ "$N" -gt 0 ] && [ "$N" -lt "$FULL" ] || fail "partial holds $N of $FULL bytes: not midway"
ok "node killed with $N of $FULL bytes of $S5 in the partial"

stop_pid "$HUB_PID"
start_hub "" "$HUB_PORT"
mv "$T/node.log" "$T/node-first.log"
start_node
wait_for 90 state_is "$REPO" ready || fail "not ready after the restart: $(router_state "$REPO") $(router_reason "$REPO")"
grep -q "$REPO: $S5 resumed at byte $N" "$T/node.log" || fail "the download did not resume at byte $N: $(grep resumed "$T/node.log")"
cmp "$T/hub/$REPO/$S5" "$T/node/models/$REPO/$S5" || fail "$S5 is not byte-identical after the resume"
[ ! -e "$PART" ] || fail "the partial was left behind"
[ "$(jq -r .node_id "$T/node/state/node.json")" = "$ID1" ] || fail "the node id changed across the restart"
grep -q "model $REPO: verifying" "$T/node.log" || fail "files already on disk were not verified"
ok "resumed at byte $N, byte-identical, same node id $ID1"
echo PASS
