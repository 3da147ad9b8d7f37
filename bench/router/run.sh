#!/usr/bin/env bash
# bench/router/run.sh — router overhead on a streamed request (build/bench/router: node direct vs via
# the router, p50/p99 added) and GET /v1/models requests/s with wrk (2 threads, 32 connections, 10 s),
# on llmr-hub + llmr-router + one llmr-node running the C reference engine on the tiny model.
#   bash bench/router/run.sh [N_REQUESTS]
HERE="$(cd "$(dirname "$0")" && pwd)"
export LLMR_BUILD="${LLMR_BUILD:-$(cd "$HERE/../.." && pwd)/build}"
source "$HERE/../../e2e/serving_lib.sh"
[ -x "$BUILD/bench/router" ] || skip "build/bench/router is not built"
need_bins
setup_engines
make_model
start_hub
start_router_auth
start_node_n 1 --max-concurrency 4
code=$(admin -o "$T/register.json" -w '%{http_code}' -X POST "$ROUTER/v0/models/register" -H 'Content-Type: application/json' \
  -d "{\"repo\":\"$REPO\",\"format\":\"safetensors\"}")
[ "$code" = 201 ] || fail "registration answered $code"
wait_for 120 nodes_ready_is 1 || fail "model not ready"
API_KEY=$(admin -X POST "$ROUTER/v0/api-keys" -H 'Content-Type: application/json' -d '{"name":"bench"}' | jq -r .key)
NTOK=$(jq -r .node_token "$T/node1/state/node.json")
echo "== router overhead ($ENGINE_ID, tiny model; $(nproc) cores)"
"$BUILD/bench/router" --router "$ROUTER" --key "$API_KEY" --node "$NODE1" --node-token "$NTOK" --model "$REPO" --requests "${1:-50}" \
  || fail "bench/router failed"
if command -v wrk >/dev/null; then
  echo "== GET /v1/models with wrk -t2 -c32 -d10s"
  wrk -t2 -c32 -d10s -H "Authorization: Bearer $API_KEY" "$ROUTER/v1/models" | sed -n '/Requests\/sec\|Latency\|requests in/p'
else
  echo "wrk is not installed (make deps installs it): /v1/models throughput not measured"
fi
