#!/usr/bin/env bash
# issue 4: a download killed midway resumes and ends byte-identical. The hub drops every transfer of
# the largest shard halfway (so it arrives slowly, in pieces); the node is killed with SIGKILL while
# NAME.partial holds part of it, the hub comes back healthy on the same port, the node is started
# again: it must resume from the partial (Range), not start over, and end with the hub's exact bytes.
# The restarted node also keeps its node id (state dir) and re-verifies the files already on disk.
# Both runs fetch 4 files of the model at once (--download-streams 4): resume works per stream.
source "$(dirname "$0")/node_lib.sh"
need_bins
setup_engines
make_model
S5=model-00005-of-00005.safetensors
start_hub "drop:$REPO/$S5"
start_router
start_node --download-streams 4
wait_for 15 grep -q "registered with" "$T/node.log" || fail "the node did not register"
grep -q "(4 download stream(s) per model" "$T/node.log" || fail "the node does not run 4 download streams"
ID1=$(jq -r .node_id "$T/node/state/node.json")
register_model "$REPO"
[ "$REG_STATUS" = 201 ] || fail "registration answered $REG_STATUS"
PART="$T/node/models/$REPO/$S5.partial"
has_partial() { [ -s "$PART" ]; }
wait_for 60 has_partial || fail "no partial download of $S5 appeared"
# While the slow download runs, heartbeats carry its progress (percent, rate, current file).
progress_beat() {
  cat "$T"/trace/heartbeat-[0-9]*.json 2>/dev/null |
    jq -c '.models[]? | select(.state == "downloading" and .progress.bytes_done > 0) | .progress' | tail -1
}
has_progress_beat() { [ -n "$(progress_beat)" ]; }
wait_for 30 has_progress_beat || fail "no heartbeat reported download progress"
prog=$(progress_beat)
has_partial || fail "the partial vanished before the kill"
kill -9 "$NODE_PID"; wait "$NODE_PID" 2>/dev/null
N=$(stat -c %s "$PART")
FULL=$(stat -c %s "$T/hub/$REPO/$S5")
[ "$N" -gt 0 ] && [ "$N" -lt "$FULL" ] || fail "partial holds $N of $FULL bytes: not midway"
ok "node killed with $N of $FULL bytes of $S5 in the partial"

stop_pid "$HUB_PID"
start_hub "" "$HUB_PORT"
mv "$T/node.log" "$T/node-first.log"
start_node --download-streams 4
wait_for 90 state_is "$REPO" ready || fail "not ready after the restart: $(router_state "$REPO") $(router_reason "$REPO")"
grep -q "$REPO: $S5 resumed at byte $N" "$T/node.log" || fail "the download did not resume at byte $N: $(grep resumed "$T/node.log")"
cmp "$T/hub/$REPO/$S5" "$T/node/models/$REPO/$S5" || fail "$S5 is not byte-identical after the resume"
[ ! -e "$PART" ] || fail "the partial was left behind"
[ "$(jq -r .node_id "$T/node/state/node.json")" = "$ID1" ] || fail "the node id changed across the restart"
grep -q "model $REPO: verifying" "$T/node.log" || fail "files already on disk were not verified"
ok "resumed at byte $N, byte-identical, same node id $ID1"
echo "$prog" | jq -e '.bytes_total > 0 and .percent > 0 and (.file | length) > 0' >/dev/null || fail "incomplete progress: $prog"
validate_traces heartbeat node-heartbeat.schema.json
ok "heartbeats reported download progress: $prog"
echo PASS
