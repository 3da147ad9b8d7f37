# e2e/lib/router.sh — helpers to run llmr-router in e2e tests and to generate hub fixture repos.
#   . e2e/lib/hub.sh; . e2e/lib/router.sh
#   router_start DATA_DIR [llmr-router flags]  # sets ROUTER_PID ROUTER_URL ROUTER_LOG
#   router_stop | router_kill9
#   rreq METHOD PATH [KEY [BODY|@file]]         # sets ST (status) and BODY (response text)
#   router_make_repo ROOT ORG/NAME KIND         # KIND: sharded single gguf ...
ROUTER_BIN="${ROUTER_BIN:-${LLMR_BUILD:-$(pwd)/build}/bin/llmr-router}"

router_start() {
  local data="$1"; shift
  ROUTER_LOG="${ROUTER_LOG_FILE:-$(mktemp /tmp/llmr-router-log.XXXXXX)}"
  local pf; pf="$(mktemp /tmp/llmr-router-port.XXXXXX)"; rm -f "$pf"
  "$ROUTER_BIN" --listen 127.0.0.1:0 --data-dir "$data" --port-file "$pf" "$@" >>"$ROUTER_LOG" 2>&1 &
  ROUTER_PID=$!
  local i
  for i in $(seq 1 200); do
    [ -s "$pf" ] && break
    kill -0 "$ROUTER_PID" 2>/dev/null || { echo "llmr-router exited:"; cat "$ROUTER_LOG"; ROUTER_PID=""; return 1; }
    sleep 0.05
  done
  ROUTER_PORT="$(cat "$pf" 2>/dev/null)"; rm -f "$pf"
  [ -n "$ROUTER_PORT" ] || { echo "llmr-router did not start:"; cat "$ROUTER_LOG"; return 1; }
  ROUTER_URL="http://127.0.0.1:$ROUTER_PORT"
}

router_stop() {
  [ -n "${ROUTER_PID:-}" ] || return 0
  kill "$ROUTER_PID" 2>/dev/null
  wait "$ROUTER_PID" 2>/dev/null
  ROUTER_PID=""
}

router_kill9() {
  [ -n "${ROUTER_PID:-}" ] || return 0
  kill -9 "$ROUTER_PID" 2>/dev/null
  wait "$ROUTER_PID" 2>/dev/null
  ROUTER_PID=""
}

# rreq METHOD PATH [KEY [BODY]]: BODY starting with @ names a file. Sets ST and BODY.
rreq() {
  local method="$1" path="$2" key="${3:-}" data="${4:-}" out
  local args=(-s -o /tmp/llmr-rreq.$$ -w '%{http_code}' -X "$method" --max-time 30)
  [ -n "$key" ] && args+=(-H "Authorization: Bearer $key")
  [ -n "$data" ] && args+=(-H 'Content-Type: application/json' --data-binary "$data")
  ST=$(curl "${args[@]}" "$ROUTER_URL$path")
  BODY=$(cat /tmp/llmr-rreq.$$ 2>/dev/null); rm -f /tmp/llmr-rreq.$$
}

# A gpt-oss-like repo. KIND:
#   sharded   config, tokenizer, tokenizer_config, chat_template.jinja (the real gpt-oss one), an index
#             and two real safetensors shards, original/model.safetensors, metal/model.bin
#   single    one model.safetensors, no index
router_make_repo() {
  local root="$1" repo="$2" kind="$3" r="$1/$2"
  mkdir -p "$r"
  printf '{"architectures":["GptOssForCausalLM"],"model_type":"gpt_oss","num_hidden_layers":2,"num_key_value_heads":2,"head_dim":8,"max_position_embeddings":4096}\n' > "$r/config.json"
  printf '{"version":"1.0","model":{"type":"BPE","vocab":{"a":0},"merges":[]}}\n' > "$r/tokenizer.json"
  printf '{"bos_token":"<|startoftext|>"}\n' > "$r/tokenizer_config.json"
  case "$kind" in
    sharded)
      cp tests/data/gptoss/chat_template.jinja "$r/chat_template.jinja"
      hub_make_safetensors "$r/model-00001-of-00002.safetensors" 4096
      hub_make_safetensors "$r/model-00002-of-00002.safetensors" 2048
      printf '{"metadata":{"total_size":6144},"weight_map":{"w":"model-00001-of-00002.safetensors","w2":"model-00002-of-00002.safetensors"}}\n' \
        > "$r/model.safetensors.index.json"
      mkdir -p "$r/original" "$r/metal"
      hub_make_safetensors "$r/original/model.safetensors" 1024
      head -c 3000 /dev/urandom > "$r/metal/model.bin"
      ;;
    single)
      hub_make_safetensors "$r/model.safetensors" 1024
      ;;
  esac
}
