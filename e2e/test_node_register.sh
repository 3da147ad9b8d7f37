#!/usr/bin/env bash
# issue 4: a node started with no models registers fine; a model registered while it runs is
# fetched without a restart, verified, validated and loaded (ready at the router, listed by
# /v1/models); files are byte-identical to the hub's and no metadata.json is written; a deleted
# model is forgotten. Every router<->node message of the run is validated against schema/*.json.
source "$(dirname "$0")/node_lib.sh"
need_bins
setup_engines
make_model
start_hub
start_router
start_node

# --- no models: registers fine, online, heartbeats flowing --------------------------------------
wait_for 15 grep -q "registered with" "$T/node.log" || fail "the node did not register"
node_online() { curl -s "$ROUTER/v0/nodes" | jq -e '.data[0].status == "online" and (.data[0].models | length) == 0'; }
wait_for 10 node_online || fail "the node is not online at the router with no models"
NODE_ID=$(jq -r .node_id "$T/node/state/node.json")
[ -n "$NODE_ID" ] && [ "$(stat -c %a "$T/node/state/node.json")" = 600 ] || fail "node.json missing or not 0600"
ok "node $NODE_ID registered with no models"

# --- the node API: auth and bad input on /v0/sync -----------------------------------------------
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$NODE/v0/sync" -d '{"event":"resync","models":[]}')
[ "$code" = 401 ] || fail "POST /v0/sync without the token answered $code, not 401"
TOKEN=$(jq -r .node_token "$T/node/state/node.json")
code=$(curl -s -o "$T/bad.json" -w '%{http_code}' -X POST "$NODE/v0/sync" -H "Authorization: Bearer $TOKEN" -d '{"event":"exploded","models":[]}')
[ "$code" = 400 ] && grep -q '"event: expected' "$T/bad.json" || fail "a bad notice answered $code: $(cat "$T/bad.json")"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$NODE/v0/sync" -H "Authorization: Bearer $TOKEN" -d '{not json')
[ "$code" = 400 ] || fail "malformed JSON answered $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "$NODE/v0/nope")
[ "$code" = 404 ] || fail "unknown path answered $code"
ok "/v0/sync refuses a missing token (401) and bad notices (400)"

# --- a model registered while the node runs --------------------------------------------------------
NODE_PID_BEFORE=$NODE_PID
register_model "$REPO"
[ "$REG_STATUS" = 201 ] || fail "registration answered $REG_STATUS: $(cat "$T/register.json")"
wait_for 90 state_is "$REPO" ready || fail "model not ready at the router (state $(router_state "$REPO"): $(router_reason "$REPO"))"
kill -0 "$NODE_PID_BEFORE" || fail "the node restarted"
for s in downloading verifying loading ready; do
  grep -q "model $REPO: $s" "$T/node.log" || fail "state $s never logged"
done
ok "registered while running -> downloading -> verifying -> loading -> ready, same process"
curl -s "$ROUTER/v1/models" | jq -e --arg id "$REPO" '.data | map(.id) | index($id) != null' >/dev/null || fail "/v1/models does not list the ready model"
ok "/v1/models lists it"

# byte-identical, nothing half-done left, never a metadata.json
(cd "$T/hub/$REPO" && find . -type f | sort | xargs sha256sum) >"$T/hub.sums"
(cd "$T/node/models/$REPO" && find . -type f | sort | xargs sha256sum) >"$T/node.sums"
diff "$T/hub.sums" "$T/node.sums" || fail "the node's copy differs from the hub's"
! find "$T/node" -name '*.partial' -o -name metadata.json | grep -q . || fail "a .partial or metadata.json was left"
ok "every file byte-identical to the hub's; no .partial, no metadata.json"

curl -s "$NODE/metrics" >"$T/metrics.txt"
grep -q '^llmr_node_models{state="ready"} 1$' "$T/metrics.txt" || fail "metrics lack the ready model"
grep -q '^llmr_node_heartbeats_total [1-9]' "$T/metrics.txt" || fail "metrics count no heartbeat"
ok "/metrics reports the ready model and heartbeats"

# --- schemas of the real messages ------------------------------------------------------------------
validate_traces register-request node-register.request.schema.json
validate_traces register-response node-register.response.schema.json
validate_traces heartbeat node-heartbeat.schema.json
validate_traces manifest model-manifest.schema.json
validate_traces sync-notice sync-notice.schema.json
# a heartbeat with the model ready, and one with download progress, were among them
grep -l '"state":"ready"' "$T"/trace/heartbeat-[0-9]*.json >/dev/null || fail "no heartbeat reported ready"
ok "registration, heartbeats, manifest and sync notices match schema/*.json"

# --- deleted at the router -> forgotten ------------------------------------------------------------
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$ROUTER/v0/models/$REPO")
[ "$code" = 200 ] || fail "DELETE answered $code"
gone() { [ "$(curl -s "$NODE/v0/status" | jq '.models | length')" = 0 ]; }
wait_for 15 gone || fail "the node still lists the deleted model"
ok "a deleted model is forgotten by the node"
echo PASS
