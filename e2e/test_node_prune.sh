#!/usr/bin/env bash
# nodeprune: a model deleted at the router leaves nothing behind on the node. Real llmr-hub, router
# and node (CPU reference engine, tiny synthetic model):
#   1. a ready model deleted while a generation streams on it: the node forgets it at once, keeps its
#      files until the generation ends (never pulls weights from under it), then removes the folder
#      and logs the bytes freed (/metrics counts them);
#   2. a model deleted mid-download: the download is cancelled and its .partial files removed;
#   3. with --keep-deleted-models the node forgets the model but its files stay;
#   4. restarted without the flag, the node removes the folders it made (STATE_DIR/owned-models.json)
#      for models the router no longer lists: what was deleted while it was down or kept goes then.
source "$(dirname "$0")/node_lib.sh"
need_bins
setup_engines
make_model
SLOW="openai/gpt-oss-slow"
cp -r "$T/hub/$REPO" "$T/hub/$SLOW"
# Every transfer of the slow model's largest shard is cut halfway: its download crawls.
start_hub "drop:$SLOW/model-00005-of-00005.safetensors"
start_router
start_node --download-streams 3
wait_for 15 grep -q "registered with" "$T/node.log" || fail "the node did not register"
grep -q "3 download stream(s) per model; files of deleted models removed" "$T/node.log" || fail "startup line lacks the settings"
TOKEN=$(jq -r .node_token "$T/node/state/node.json")
DIR="$T/node/models/$REPO"
gone_from_node() { [ -z "$(node_state "$1")" ]; }
not_deleting() { curl -s "$NODE/v0/status" | jq -e --arg id "$1" '(.deleting | index($id)) == null' >/dev/null; }
delete_model() {
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$ROUTER/v0/models/$1")
  [ "$code" = 200 ] || fail "DELETE $1 answered $code"
}

# --- 1. ready, then deleted while a generation runs -----------------------------------------------
register_model "$REPO"
[ "$REG_STATUS" = 201 ] || fail "registration answered $REG_STATUS: $(cat "$T/register.json")"
wait_for 60 state_is "$REPO" ready || fail "model not ready (state $(router_state "$REPO"): $(router_reason "$REPO"))"
BYTES=$(find "$DIR" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
[ "$BYTES" -gt 0 ] || fail "no files in $DIR"
ok "model ready, $BYTES bytes in $DIR"

curl -sN -X POST "$NODE/v0/generate" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' --max-time 6 \
  -d "{\"model\":\"$REPO\",\"prompt\":\"hi\",\"max_tokens\":100000,\"parse\":\"none\"}" >"$T/gen.sse" 2>/dev/null &
GEN_PID=$!; PIDS+=($GEN_PID)
streaming() { [ "$(grep -c '"type":"delta"' "$T/gen.sse")" -ge 2 ]; }
wait_for 10 streaming || fail "the generation did not start streaming: $(head -c 300 "$T/gen.sse")"
delete_model "$REPO"
wait_for 10 gone_from_node "$REPO" || fail "the node still lists the deleted model"
GEN_RUNNING=0
if kill -0 "$GEN_PID" 2>/dev/null && ! grep -q '"type":"done"' "$T/gen.sse"; then GEN_RUNNING=1; fi
if [ "$GEN_RUNNING" = 1 ]; then
  [ -d "$DIR" ] || fail "the folder was removed while a generation still ran on the model"
  curl -s "$NODE/v0/status" | jq -e --arg id "$REPO" '.deleting | index($id) != null' >/dev/null ||
    fail "/v0/status does not list the model under deleting while its generation runs"
  grep -q "model $REPO: deleting its files once its 1 in-flight request(s) finish" "$T/node.log" ||
    fail "the node did not say it waits for the in-flight request"
  ok "deleted while generating: forgotten at once, files kept until the generation ends"
else
  echo "note: the generation ended before the deletion reached the node: waiting was not exercised"
fi
kill "$GEN_PID" 2>/dev/null; wait "$GEN_PID" 2>/dev/null # the client leaves: the generation is cancelled
no_dir() { [ ! -e "$DIR" ]; }
wait_for 15 no_dir || fail "$DIR still exists after the generation ended"
[ ! -e "$T/node/models/openai" ] || fail "the empty parent folder $T/node/models/openai was left"
[ -d "$T/node/models" ] || fail "--models-dir itself was removed"
wait_for 5 not_deleting "$REPO" || fail "/v0/status still lists the model under deleting"
grep -q "model $REPO deleted at the router: removed $DIR (.*), $BYTES bytes" "$T/node.log" ||
  fail "no log line with the bytes freed: $(grep "deleted at the router" "$T/node.log")"
curl -s "$NODE/metrics" >"$T/metrics.txt"
grep -q '^llmr_node_models_pruned_total 1$' "$T/metrics.txt" || fail "metrics: $(grep pruned "$T/metrics.txt")"
grep -q "^llmr_node_pruned_bytes_total $BYTES\$" "$T/metrics.txt" || fail "metrics: $(grep pruned "$T/metrics.txt")"
ok "folder removed once the generation ended, $BYTES bytes freed (log and /metrics)"

# --- 2. deleted mid-download ------------------------------------------------------------------------
register_model "$SLOW"
[ "$REG_STATUS" = 201 ] || fail "registration of $SLOW answered $REG_STATUS: $(cat "$T/register.json")"
SDIR="$T/node/models/$SLOW"
has_partial() { ls "$SDIR"/*.partial >/dev/null 2>&1; }
wait_for 30 has_partial || fail "no partial download of $SLOW appeared"
node_state_is "$SLOW" downloading || fail "$SLOW is $(node_state "$SLOW"), not downloading"
delete_model "$SLOW"
wait_for 10 gone_from_node "$SLOW" || fail "the node still lists $SLOW"
no_sdir() { [ ! -e "$SDIR" ]; }
wait_for 20 no_sdir || fail "$SDIR (partial download) still exists: $(ls -la "$SDIR")"
grep -q "model $SLOW deleted at the router: removed $SDIR" "$T/node.log" || fail "no removal logged for $SLOW"
! grep -q "model $SLOW: \(verifying\|ready\)" "$T/node.log" || fail "the cancelled download went on"
ok "deleted mid-download: download cancelled, partial files removed"

# --- 3. --keep-deleted-models -----------------------------------------------------------------------
stop_pid "$NODE_PID"
mv "$T/node.log" "$T/node-pruning.log"
start_node --keep-deleted-models
wait_for 15 grep -q "registered with" "$T/node.log" || fail "the node did not register again"
register_model "$REPO"
[ "$REG_STATUS" = 201 ] || fail "re-registration answered $REG_STATUS: $(cat "$T/register.json")"
wait_for 60 state_is "$REPO" ready || fail "model not ready again (state $(router_state "$REPO"): $(router_reason "$REPO"))"
(cd "$DIR" && find . -type f | sort | xargs sha256sum) >"$T/before.sums"
delete_model "$REPO"
wait_for 10 gone_from_node "$REPO" || fail "the node still lists the deleted model (--keep-deleted-models)"
sleep 1
(cd "$DIR" && find . -type f | sort | xargs sha256sum) >"$T/after.sums" || fail "$DIR is gone despite --keep-deleted-models"
diff "$T/before.sums" "$T/after.sums" >/dev/null || fail "files changed despite --keep-deleted-models"
grep -q "model $REPO is no longer registered at the router: forgotten (its files stay in $DIR, --keep-deleted-models)" "$T/node.log" ||
  fail "no log line saying the files stay"
curl -s "$NODE/metrics" >"$T/metrics-keep.txt" # (not piped into grep -q: pipefail would see curl's SIGPIPE)
grep -q '^llmr_node_models_pruned_total 0$' "$T/metrics-keep.txt" || fail "the keeping node counts a prune: $(grep pruned "$T/metrics-keep.txt")"
ok "--keep-deleted-models: forgotten, every file kept"

# --- 4. restarted without --keep-deleted-models ----------------------------------------------------
jq -e --arg id "$REPO" '.models | index($id) != null' "$T/node/state/owned-models.json" >/dev/null ||
  fail "the ledger does not list $REPO: $(cat "$T/node/state/owned-models.json")"
stop_pid "$NODE_PID"
mv "$T/node.log" "$T/node-keeping.log"
mkdir -p "$T/node/models/operator/own" && echo mine >"$T/node/models/operator/own/notes.txt"
start_node --prune-grace 2
wait_for 15 grep -q "model $REPO: removing its files in 2 s unless the router lists it again" "$T/node.log" ||
  fail "the left-over folder did not get its grace period"
[ -d "$DIR" ] || fail "$DIR removed before its grace period ended"
wait_for 15 no_dir || fail "$DIR, deleted at the router before the restart, was not removed"
grep -q "model $REPO is no longer registered at the router (deleted while this node was down?)" "$T/node.log" ||
  fail "no log line for the folder left from before the restart"
[ -f "$T/node/models/operator/own/notes.txt" ] || fail "a folder the node did not create was touched"
jq -e '.models == []' "$T/node/state/owned-models.json" >/dev/null || fail "ledger not emptied: $(cat "$T/node/state/owned-models.json")"
ok "restarted without the flag: the kept folder is removed, the operator's own folder untouched"
echo PASS
