#!/usr/bin/env bash
# Shared setup for e2e/test_serving_*.sh (issue 9): llmr-hub serving a tiny synthetic gpt-oss model,
# llmr-router, and two llmr-node processes (--gpu none) running the C reference engine. Builds on
# e2e/node_lib.sh (same helpers, same cleanup of every process by pid).
source "$(dirname "${BASH_SOURCE[0]}")/node_lib.sh"

# start_node_n N [flags]: node N (1 or 2) with its own state/models/log; sets NODE<N>, NODE<N>_PID.
start_node_n() {
  local k=$1; shift
  local log="$T/node$k.log"
  : >"$log"
  "$BIN/llmr-node" --router "$ROUTER" --listen 127.0.0.1:0 --gpu none --models-dir "$T/node$k/models" \
    --state-dir "$T/node$k/state" --engines-dir "$ENGINES" "$@" >>"$log" 2>&1 &
  local pid=$!; PIDS+=($pid)
  eval "NODE${k}_PID=$pid"
  port_of() { sed -n 's/.*listening on .*(port \([0-9]*\)).*/\1/p' "$log" | tail -1; }
  local end=$(( $(date +%s) + 30 )) p=""
  while [ -z "$p" ] && [ "$(date +%s)" -lt "$end" ]; do p=$(port_of); [ -z "$p" ] && sleep 0.2; done
  [ -n "$p" ] || fail "llmr-node $k did not start"
  eval "NODE${k}=http://127.0.0.1:$p"
}

ADMIN_KEY="e2e-admin-key-0123456789"
# The router with a real admin key (no --insecure-no-auth): keys are part of what is tested.
start_router_auth() {
  : >"$T/router.log"
  "$BIN/llmr-router" --listen 127.0.0.1:0 --data-dir "$T/router" --hub-endpoint "http://127.0.0.1:$HUB_PORT" \
    --admin-key "$ADMIN_KEY" --allow-cpu-nodes --heartbeat-interval 1 --sync-interval 30 "$@" >>"$T/router.log" 2>&1 &
  ROUTER_PID=$!; PIDS+=($ROUTER_PID)
  wait_for 30 router_listening || fail "llmr-router did not start"
  ROUTER_PORT=$(router_port_from_log)
  ROUTER="http://127.0.0.1:$ROUTER_PORT"
}
admin() { curl -s -H "Authorization: Bearer $ADMIN_KEY" "$@"; }
ready_nodes() { admin "$ROUTER/v0/models/$REPO" | jq '[.nodes[]? | select(.state == "ready" and .online)] | length'; }
nodes_ready_is() { [ "$(ready_nodes)" = "$1" ]; }

# serving_up [router flags]: hub + router + two nodes with the model ready on both.
serving_up() {
  need_bins
  setup_engines
  make_model
  start_hub
  start_router_auth "$@"
  start_node_n 1 --max-concurrency 2
  start_node_n 2 --max-concurrency 2
  REG_STATUS=$(admin -o "$T/register.json" -w '%{http_code}' -X POST "$ROUTER/v0/models/register" \
    -H 'Content-Type: application/json' -d "{\"repo\":\"$REPO\",\"format\":\"safetensors\"}")
  [ "$REG_STATUS" = 201 ] || fail "registration answered $REG_STATUS: $(cat "$T/register.json")"
  wait_for 120 nodes_ready_is 2 || fail "model not ready on both nodes: $(admin "$ROUTER/v0/models/$REPO" | jq -c '.nodes')"
  API_KEY=$(admin -X POST "$ROUTER/v0/api-keys" -H 'Content-Type: application/json' -d '{"name":"e2e"}' | jq -r .key)
  case "$API_KEY" in sk-llmr-*) ;; *) fail "POST /v0/api-keys gave no key";; esac
  ok "hub, router, 2 nodes ($ENGINE_ID); $REPO ready on both"
}
