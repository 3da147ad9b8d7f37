#!/usr/bin/env bash
# make demo (issue 9): llmr-hub serving a generated gpt-oss checkpoint (tiny by default; FULL=1 for
# the full-size synthetic 20b, meant for a GPU box), llmr-router, one llmr-node (the CUDA engine when
# an NVIDIA GPU is present, otherwise the C reference engine, with a notice), the model registered,
# one chat through curl; then everything keeps running until Ctrl-C.
#   e2e/demo.sh [BUILD_DIR]      env: FULL=1, DEMO_DIR=/path (default: a fresh temp dir), PORT=N (router port; default: any free port)
set -uo pipefail
BUILD="$(cd "${1:-build}" 2>/dev/null && pwd)" || { echo "demo: build folder '${1:-build}' not found (run make)"; exit 1; }
BIN="$BUILD/bin"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
for b in llmr-hub llmr-router llmr-node llmr-mkmodel; do
  [ -x "$BIN/$b" ] || { echo "demo: $BIN/$b is missing: run make first"; exit 1; }
done
for c in curl jq; do command -v $c >/dev/null || { echo "demo: '$c' is not installed (make deps installs it)"; exit 1; }; done
D="${DEMO_DIR:-$(mktemp -d /tmp/llmr-demo-XXXXXX)}"
mkdir -p "$D"
PIDS=()
stop_all() {
  echo; echo "stopping..."
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  echo "stopped. Logs and data stay in $D"
  exit 0
}
trap stop_all INT TERM
die() { echo "demo: $*"; for f in "$D"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -15 "$f"; }; done; stop_all; }
wait_for() { local n=$(( $1 * 5 )); shift; while [ $n -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; n=$((n-1)); done; return 1; }

PRESET=tiny; [ "${FULL:-0}" = 1 ] && PRESET=20b
REPO="openai/gpt-oss-demo-$PRESET"
ADMIN_KEY="demo-admin-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
JOIN_KEY="demo-join-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"

GPU=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU && [ -f "$BUILD/engines/gptoss_cuda/manifest.json" ]; then GPU=1; fi
mkdir -p "$D/engines"
if [ $GPU = 1 ]; then
  cp -r "$BUILD/engines/gptoss_cuda" "$D/engines/"
  ENGINE="gptoss_cuda (CUDA)"; NODE_GPU=auto; CPU_FLAG=()
else
  [ -f "$BUILD/engines/gptoss_ref/manifest.json" ] || { echo "demo: $BUILD/engines/gptoss_ref is not built"; exit 1; }
  cp -r "$BUILD/engines/gptoss_ref" "$D/engines/"
  ENGINE="gptoss_ref (C reference, CPU)"; NODE_GPU=none; CPU_FLAG=(--allow-cpu-nodes)
  echo "NOTICE: no NVIDIA GPU (or no CUDA engine built) here: the node runs the C reference engine on CPU."
  [ "$PRESET" = 20b ] && echo "NOTICE: FULL=1 on CPU will be very slow; the tiny model is the CPU default."
fi

echo "[1/5] generating the $PRESET synthetic gpt-oss checkpoint in $D/hub/$REPO"
mkdir -p "$D/hub/openai"
( cd "$ROOT" && "$BIN/llmr-mkmodel" --preset "$PRESET" --seed 7 --out "$D/hub/$REPO" ) >"$D/mkmodel.log" 2>&1 || die "llmr-mkmodel failed"

echo "[2/5] starting llmr-hub, llmr-router and llmr-node ($ENGINE)"
"$BIN/llmr-hub" --root "$D/hub" --listen 127.0.0.1:0 --port-file "$D/hub.port" --cache "$D/hubcache" >"$D/hub.log" 2>&1 &
PIDS+=($!)
wait_for 30 test -s "$D/hub.port" || die "llmr-hub did not start"
HUB="http://127.0.0.1:$(cat "$D/hub.port")"
"$BIN/llmr-router" --listen "127.0.0.1:${PORT:-0}" --port-file "$D/router.port" --data-dir "$D/router" --hub-endpoint "$HUB" \
  --admin-key "$ADMIN_KEY" --node-join-key "$JOIN_KEY" --heartbeat-interval 2 "${CPU_FLAG[@]}" >"$D/router.log" 2>&1 &
PIDS+=($!)
wait_for 30 test -s "$D/router.port" || die "llmr-router did not start (is port ${PORT:-0} free?)"
ROUTER="http://127.0.0.1:$(cat "$D/router.port")"
"$BIN/llmr-node" --router "$ROUTER" --listen 127.0.0.1:0 --gpu "$NODE_GPU" --models-dir "$D/node/models" \
  --state-dir "$D/node/state" --engines-dir "$D/engines" --join-key "$JOIN_KEY" >"$D/node.log" 2>&1 &
PIDS+=($!)
node_port() { sed -n 's/.*listening on .*(port \([0-9]*\)).*/\1/p' "$D/node.log" 2>/dev/null | tail -1; }
node_port_known() { [ -n "$(node_port)" ]; }
wait_for 30 node_port_known || wait_for 30 sh -c "grep -q 'listening on' '$D/node.log'" || die "llmr-node did not start"
NODE="http://127.0.0.1:$(node_port)"
adm() { curl -s -H "Authorization: Bearer $ADMIN_KEY" "$@"; }

echo "[3/5] registering $REPO (the node downloads and loads it)"
code=$(adm -o "$D/register.json" -w '%{http_code}' -X POST "$ROUTER/v0/models/register" -H 'Content-Type: application/json' \
  -d "{\"repo\":\"$REPO\",\"format\":\"safetensors\"}")
[ "$code" = 201 ] || die "registration answered $code: $(cat "$D/register.json")"
ready() { adm "$ROUTER/v0/models/$REPO" | jq -e '[.nodes[]? | select(.state == "ready")] | length > 0'; }
wait_for 1800 ready || die "the model did not become ready: $(adm "$ROUTER/v0/models/$REPO" | jq -c .nodes)"
API_KEY=$(adm -X POST "$ROUTER/v0/api-keys" -H 'Content-Type: application/json' -d '{"name":"demo"}' | jq -r .key)

echo "[4/5] one chat through curl"
REQ="{\"model\":\"$REPO\",\"messages\":[{\"role\":\"user\",\"content\":\"Say hello in five words.\"}],\"max_tokens\":32,\"seed\":1}"
echo "  curl $ROUTER/v1/chat/completions -H 'Authorization: Bearer $API_KEY' -H 'Content-Type: application/json' -d '$REQ'"
ANS=$(curl -s "$ROUTER/v1/chat/completions" -H "Authorization: Bearer $API_KEY" -H 'Content-Type: application/json' -d "$REQ")
echo "$ANS" | jq -e '.choices[0]' >/dev/null || die "the chat failed: $ANS"
echo "  answer: $(echo "$ANS" | jq -r '.choices[0].message.content') (finish $(echo "$ANS" | jq -r '.choices[0].finish_reason'), usage $(echo "$ANS" | jq -c .usage))"
echo "  (the weights are random: the words are noise, the serving path is real)"

echo "[5/5] running. Ctrl-C stops everything."
cat <<EOT
  router (OpenAI API)  $ROUTER/v1      e.g. OPENAI_BASE_URL=$ROUTER/v1 OPENAI_API_KEY=$API_KEY
  dashboard            $ROUTER/dashboard   (sign in with the admin key)
  metrics              $ROUTER/metrics
  node                 $NODE/v0/status
  hub                  $HUB
  admin key            $ADMIN_KEY
  node join key        $JOIN_KEY
  API key              $API_KEY
  model                $REPO
  logs                 $D/*.log
EOT
while :; do sleep 1; done
