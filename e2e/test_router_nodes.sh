#!/usr/bin/env bash
# e2e: the router side of the node protocol (issue 4). A GPU node and, with --allow-cpu-nodes, a
# CPU node register (answers checked against schema/node-register.response); a node without GPU is
# refused (403 naming NFR-001) by a router without the flag; heartbeats (schema/node-heartbeat)
# update GET /v0/nodes and the per-node model states of GET /v0/models/{repo}; GET /v1/models lists
# only models ready on an online node; a node silent for the heartbeat timeout goes offline and comes
# back with its next heartbeat; registering and deleting a model pushes POST /v0/sync (node token,
# schema/sync-notice) to a listening node.
set -uo pipefail
cd "$(dirname "$0")/.."
. e2e/lib/hub.sh
. e2e/lib/router.sh
BIN="${LLMR_BUILD:-$(pwd)/build}/bin"
for t in curl jq python3; do command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }; done
[ -x "$BIN/llmr-hub" ] && [ -x "$BIN/llmr-router" ] || { echo "FAIL: build llmr-hub and llmr-router first"; exit 1; }

WORK="$(mktemp -d /tmp/llmr-e2e-nodes.XXXXXX)"
ROUTER_LOG_FILE="$WORK/router.log"
FAKE_PID=""
cleanup() { router_stop; hub_stop; [ -n "$FAKE_PID" ] && { kill "$FAKE_PID" 2>/dev/null; wait "$FAKE_PID" 2>/dev/null; }; rm -rf "$WORK"; }
trap cleanup EXIT
fails=0
ok()   { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails+1)); }
check() { local what="$1"; shift; if "$@" >/dev/null; then ok "$what"; else fail "$what"; fi; }
expect() {
  local code; code=$(echo "$BODY" | jq -r '.error.code // empty' 2>/dev/null)
  if [ "$ST" = "$1" ] && { [ "$2" = "-" ] || [ "$code" = "$2" ]; }; then ok "$3"
  else fail "$3: got $ST $code: $(echo "$BODY" | head -c 400)"; fi
}
jbody() { echo "$BODY" | jq -e "$1" >/dev/null 2>&1; }
schema_ok() { # schema_ok NAME JSONTEXT WHAT
  echo "$2" > "$WORK/doc.json"
  node e2e/lib/validate_schema.js "schema/$1.schema.json" "$WORK/doc.json"; local rc=$?
  if [ $rc = 0 ]; then ok "$3"; elif [ $rc = 77 ]; then echo "skip $3 (no ajv)"; else fail "$3"; fi
}

# A listening "node": records each POST /v0/sync (Authorization header + body), answers 200.
cat > "$WORK/fake_node.py" <<'PY'
import http.server, json, sys
log = sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get('Content-Length', 0)))
        with open(log, 'a') as f:
            f.write(json.dumps({"path": self.path, "auth": self.headers.get('Authorization'), "body": json.loads(body)}) + "\n")
        self.send_response(200); self.send_header('Content-Type', 'application/json'); self.end_headers()
        self.wfile.write(b'{"ok":true}')
    def log_message(self, *a): pass
s = http.server.HTTPServer(('127.0.0.1', 0), H)
open(sys.argv[1], 'w').write(str(s.server_address[1]))
s.serve_forever()
PY
python3 "$WORK/fake_node.py" "$WORK/fake.port" "$WORK/sync.log" & FAKE_PID=$!
for i in $(seq 1 100); do [ -s "$WORK/fake.port" ] && break; sleep 0.05; done
FAKE_PORT=$(cat "$WORK/fake.port")

ROOT="$WORK/hub"
router_make_repo "$ROOT" test/alpha single
router_make_repo "$ROOT" test/beta single
hub_start "$ROOT" --cache "$WORK/hubcache" || exit 1
ADMIN=admin-key-nodes-0123456789

# --- a router without --allow-cpu-nodes refuses a GPU-less node ------------------------------------
CPU_NODE='{"machine_name":"laptop","address":"127.0.0.1","port":9,"gpus":[],"engines":[{"id":"gptoss-ref","version":"1","runtimes":["gptoss"],"formats":["safetensors"],"cpu_only":true}]}'
router_start "$WORK/data1" --admin-key "$ADMIN" --hub-endpoint "$HUB_URL" || exit 1
rreq POST /v0/nodes "" "$CPU_NODE"; expect 403 gpu_required "GPU-less node refused without --allow-cpu-nodes"
check "message says why (NFR-001)" jbody '.error.message|test("NFR-001")'
rreq POST /v0/nodes "" '{"machine_name":"m"}'; expect 400 invalid_node_registration "incomplete registration: 400"
rreq POST /v0/nodes "" '{"machine_name":"m","address":"x y","port":1,"gpus":[],"engines":[]}'; expect 400 invalid_node_registration "bad address: 400"
rreq POST /v0/nodes "" 'not json'; expect 400 - "malformed registration: 400"
router_stop

# --- the router under test: 1 s heartbeats, 3 s timeout --------------------------------------------
router_start "$WORK/data" --admin-key "$ADMIN" --hub-endpoint "$HUB_URL" --allow-cpu-nodes \
  --heartbeat-interval 1 --heartbeat-timeout 3 --sync-interval 7 || exit 1
rreq POST /v0/nodes "" "$CPU_NODE"; expect 201 - "CPU node accepted with --allow-cpu-nodes"
schema_ok node-register.response "$BODY" "registration answer matches schema/node-register.response"
check "settings: allow_cpu_engines true, intervals" jbody '.settings.allow_cpu_engines==true and .settings.heartbeat_interval_s==1 and .settings.sync_interval_s==7'
CPU_ID=$(echo "$BODY" | jq -r .node_id); CPU_TOK=$(echo "$BODY" | jq -r .node_token)
GPU_NODE="{\"machine_name\":\"gpu-box\",\"address\":\"127.0.0.1\",\"port\":$FAKE_PORT,\"version\":\"0.1\",\"max_concurrency\":4,\"gpus\":[{\"index\":0,\"name\":\"NVIDIA H100\",\"memory_total_bytes\":85899345920,\"compute_capability\":\"9.0\"}],\"engines\":[{\"id\":\"gptoss-cuda\",\"version\":\"1\",\"runtimes\":[\"gptoss\"],\"formats\":[\"safetensors\"],\"gpu_backends\":[\"cuda\"]}]}"
schema_ok node-register.request "$GPU_NODE" "the test's registration matches schema/node-register.request"
rreq POST /v0/nodes "" "$GPU_NODE"; expect 201 - "GPU node registers"
GPU_ID=$(echo "$BODY" | jq -r .node_id); GPU_TOK=$(echo "$BODY" | jq -r .node_token)
rreq POST /v0/nodes "$CPU_TOK" "$(echo "$GPU_NODE" | jq -c --arg id "$GPU_ID" '.node_id=$id')"
expect 403 wrong_node "a node token cannot re-register another node"

hb() { # hb ID TOKEN MODELS_JSON [ACTIVE]
  rreq POST /v0/health "$2" "{\"node_id\":\"$1\",\"gpus\":[{\"index\":0,\"memory_total_bytes\":85899345920,\"memory_free_bytes\":40000000000,\"utilization_percent\":12.5}],\"active_requests\":${4:-0},\"models\":$3}"
}
hb "$GPU_ID" "$GPU_TOK" '[]'; expect 200 - "heartbeat accepted"
hb "$GPU_ID" "$ADMIN" '[]'; expect 403 wrong_key_kind "heartbeat with the admin key: 403"
hb "$GPU_ID" "" '[]'; expect 401 missing_api_key "heartbeat without a token: 401"
hb "$GPU_ID" "$CPU_TOK" '[]'; expect 403 wrong_node "heartbeat for another node: 403"
hb "$GPU_ID" "$GPU_TOK" '[{"id":"x/y","state":"dancing"}]'; expect 400 invalid_heartbeat "unknown model state: 400"
rreq POST /v0/health "$GPU_TOK" '{"node_id":"'"$GPU_ID"'"}'; expect 400 invalid_heartbeat "heartbeat missing fields: 400"

# --- registration pushes /v0/sync to the online node that listens ---------------------------------
rreq POST /v0/models/register "$ADMIN" '{"repo":"test/alpha"}'; expect 201 - "register test/alpha"
for i in $(seq 1 100); do grep -q '"registered"' "$WORK/sync.log" 2>/dev/null && break; sleep 0.05; done
line=$(grep '"registered"' "$WORK/sync.log" | head -1)
check "sync pushed to the node on register" test -n "$line"
check "push carries the node token" test "$(echo "$line" | jq -r .auth)" = "Bearer $GPU_TOK"
check "push names the model and the full list" bash -c "echo '$line' | jq -e '.path==\"/v0/sync\" and .body.model==\"test/alpha\" and .body.models==[\"test/alpha\"]'"
schema_ok sync-notice "$(echo "$line" | jq -c .body)" "push matches schema/sync-notice"

# --- model states per node, /v1/models -------------------------------------------------------------
rreq POST /v0/api-keys "$ADMIN" '{"name":"client"}'; APIKEY=$(echo "$BODY" | jq -r .key)
rreq GET /v1/models "$APIKEY"; expect 200 - "GET /v1/models with an API key"
check "nothing ready yet: empty list" jbody '.object=="list" and (.data|length)==0'
HB='[{"id":"test/alpha","state":"downloading","progress":{"bytes_done":10,"bytes_total":40,"percent":25.0,"bytes_per_second":1000,"eta_seconds":0.03,"file":"model.safetensors"}}]'
schema_ok node-heartbeat "{\"node_id\":\"$GPU_ID\",\"gpus\":[],\"active_requests\":0,\"models\":$HB}" "the test's heartbeat matches schema/node-heartbeat"
hb "$GPU_ID" "$GPU_TOK" "$HB"; expect 200 - "heartbeat: downloading 25%"
check "heartbeat answer lists registered models (a poll)" jbody '.models==["test/alpha"]'
hb "$CPU_ID" "$CPU_TOK" '[{"id":"test/alpha","state":"unsupported","reason":"no engine for runtime gptoss on cpu"}]'
rreq GET /v0/models/test/alpha "$ADMIN"
check "per-node states in GET /v0/models/{repo}" jbody "(.nodes|length)==2 and (.nodes[]|select(.node_id==\"$GPU_ID\")|.state==\"downloading\" and .progress.percent==25) and (.nodes[]|select(.node_id==\"$CPU_ID\")|.state==\"unsupported\" and (.reason|test(\"no engine\")))"
check "not ready anywhere yet" jbody '.ready==false'
rreq GET /v1/models "$APIKEY"; check "/v1/models still empty while downloading" jbody '(.data|length)==0'
hb "$GPU_ID" "$GPU_TOK" '[{"id":"test/alpha","state":"ready","engine":"gptoss-cuda","loaded":true}]' 2
rreq GET /v1/models "$APIKEY"
check "/v1/models lists the ready model (OpenAI shape)" jbody '.data==[.data[0]] and .data[0].id=="test/alpha" and .data[0].object=="model" and .data[0].owned_by=="test" and (.data[0].created|type)=="number"'
rreq GET /v1/models "$GPU_TOK"; expect 403 wrong_key_kind "node token on /v1/models: 403"
rreq GET /v0/models "$ADMIN"; check "GET /v0/models marks the ready model" jbody '.data|map(select(.id=="test/alpha"))|.[0].ready==true'
rreq GET /v0/nodes "$ADMIN"; expect 200 - "GET /v0/nodes"
check "GET /v0/nodes shows both, online, with GPUs, engines, memory, models" jbody "(.data|length)==2 and (.data[]|select(.id==\"$GPU_ID\")|.online==true and .status==\"online\" and .gpus[0].name==\"NVIDIA H100\" and .engines[0].id==\"gptoss-cuda\" and .gpu_status[0].memory_free_bytes==40000000000 and .active_requests==2 and .models[0].state==\"ready\" and .max_concurrency==4)"
rreq GET /v0/nodes "$APIKEY"; expect 403 wrong_key_kind "GET /v0/nodes with an API key: 403"

# --- offline after 3 missed heartbeats, online again when they resume --------------------------------
# keep the CPU node alive while the GPU node goes silent (beats twice the rate the router asks for,
# so a slow curl on a loaded machine cannot leave it silent for the 3 s timeout)
for i in $(seq 1 10); do hb "$CPU_ID" "$CPU_TOK" '[]'; sleep 0.5; done
rreq GET /v0/nodes "$ADMIN"
check "silent GPU node is offline" jbody "(.data[]|select(.id==\"$GPU_ID\")|.online==false and .status==\"offline\" and .seconds_since_heartbeat>=3)"
check "the CPU node that kept beating is online" jbody "(.data[]|select(.id==\"$CPU_ID\")|.online==true)"
check "router logged the offline transition" grep -q "node $GPU_ID (gpu-box) is offline" "$WORK/router.log"
rreq GET /v1/models "$APIKEY"; check "/v1/models drops a model whose only ready node is offline" jbody '(.data|length)==0'
# a push goes only to online nodes
: > "$WORK/sync.log"
rreq POST /v0/models/register "$ADMIN" '{"repo":"test/beta"}'; expect 201 - "register test/beta while the node is offline"
sleep 0.5
check "no push to an offline node" test ! -s "$WORK/sync.log"
hb "$GPU_ID" "$GPU_TOK" '[{"id":"test/alpha","state":"ready"}]'; expect 200 - "heartbeat resumes"
rreq GET /v0/nodes "$ADMIN"
check "node online again" jbody "(.data[]|select(.id==\"$GPU_ID\")|.online==true)"
check "router logged it" grep -q "node $GPU_ID (gpu-box) is online again" "$WORK/router.log"
rreq GET /v1/models "$APIKEY"; check "/v1/models lists the model again" jbody '.data[0].id=="test/alpha"'

# --- delete pushes too --------------------------------------------------------------------------------
rreq DELETE /v0/models/test/alpha "$ADMIN"; expect 200 - "delete test/alpha"
for i in $(seq 1 100); do grep -q '"deleted"' "$WORK/sync.log" 2>/dev/null && break; sleep 0.05; done
line=$(grep '"deleted"' "$WORK/sync.log" | head -1)
check "sync pushed on delete, with the remaining list" bash -c "echo '$line' | jq -e '.body.event==\"deleted\" and .body.model==\"test/alpha\" and .body.models==[\"test/beta\"]'"
rreq GET /v1/models "$APIKEY"; check "/v1/models no longer lists a deleted model" jbody '(.data|length)==0'

# --- restart: nodes are known (offline until they speak), tokens still valid ---------------------------
router_stop
router_start "$WORK/data" --admin-key "$ADMIN" --hub-endpoint "$HUB_URL" --allow-cpu-nodes --heartbeat-interval 1 --heartbeat-timeout 3 || exit 1
rreq GET /v0/nodes "$ADMIN"
check "nodes remembered across a restart, offline" jbody '(.data|length)==2 and (.data|all(.online==false))'
hb "$GPU_ID" "$GPU_TOK" '[]'; expect 200 - "the node's token works after the restart"
rreq POST /v0/nodes "" "$(echo "$GPU_NODE" | jq -c --arg id "$GPU_ID" '.node_id=$id')"; expect 201 - "re-registration with its node_id"
check "keeps its id" jbody ".node_id==\"$GPU_ID\""
NEWTOK=$(echo "$BODY" | jq -r .node_token)
hb "$GPU_ID" "$GPU_TOK" '[]'; expect 401 invalid_api_key "the old token is revoked by re-registration"
hb "$GPU_ID" "$NEWTOK" '[]'; expect 200 - "the new token works"

if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; tail -20 "$WORK/router.log"; exit 1; fi
echo "all router node checks passed"
