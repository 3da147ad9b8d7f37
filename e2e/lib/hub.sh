# e2e/lib/hub.sh — helpers to serve a generated model snapshot with llmr-hub in e2e tests.
#   . e2e/lib/hub.sh
#   hub_make_fixture ROOT            # ROOT/org/tiny/... (small files + a 12 MB .safetensors)
#   hub_start ROOT [llmr-hub flags]  # sets HUB_PID HUB_PORT HUB_URL HUB_LOG; stop with hub_stop
# Needs $LLMR_BUILD (tests/run_all.sh sets it) or ./build.

HUB_BIN="${LLMR_BUILD:-$(pwd)/build}/bin/llmr-hub"

# Writes a valid safetensors file PATH holding one U8 tensor "w" of N bytes (pseudo-random data).
hub_make_safetensors() {
  local path="$1" n="$2"
  local header="{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"U8\",\"shape\":[$n],\"data_offsets\":[0,$n]}}"
  while [ $(( ${#header} % 8 )) -ne 0 ]; do header="$header "; done
  local len=${#header} i le=""
  for i in 0 1 2 3 4 5 6 7; do le="$le\\x$(printf %02x $(( (len >> (8*i)) & 255 )))"; done
  { printf "$le"; printf '%s' "$header"; head -c "$n" /dev/urandom; } > "$path"
}

hub_make_fixture() {
  local root="$1" r="$1/org/tiny"
  mkdir -p "$r/sub dir" "$1/org/pinned"
  printf '{"architectures":["GptOssForCausalLM"],"model_type":"gpt_oss","num_hidden_layers":2}\n' > "$r/config.json"
  printf '{"bos_token":"<|startoftext|>"}\n' > "$r/tokenizer_config.json"
  printf 'hello from a nested file\n' > "$r/sub dir/notes #1.txt"
  printf 'x' > "$r/one.bin"                       # LFS by extension, 1 byte
  : > "$r/empty.txt"
  hub_make_safetensors "$r/model.safetensors" $((12 * 1024 * 1024))
  head -c $((11 * 1024 * 1024)) /dev/urandom > "$r/big.dat"   # LFS by size (>= 10 MiB)
  printf '{"pinned":true}\n' > "$1/org/pinned/config.json"
  printf '0123456789abcdef0123456789abcdef01234567\n' > "$1/org/pinned/.commit"
}

hub_start() {
  local root="$1"; shift
  HUB_LOG="$(mktemp /tmp/llmr-hub-log.XXXXXX)"
  local pf; pf="$(mktemp /tmp/llmr-hub-port.XXXXXX)"; rm -f "$pf"
  "$HUB_BIN" --root "$root" --listen 127.0.0.1:0 --port-file "$pf" "$@" >"$HUB_LOG" 2>&1 &
  HUB_PID=$!
  local i
  for i in $(seq 1 200); do
    [ -s "$pf" ] && break
    kill -0 "$HUB_PID" 2>/dev/null || { echo "llmr-hub exited:"; cat "$HUB_LOG"; return 1; }
    sleep 0.05
  done
  HUB_PORT="$(cat "$pf" 2>/dev/null)"; rm -f "$pf"
  [ -n "$HUB_PORT" ] || { echo "llmr-hub did not start:"; cat "$HUB_LOG"; return 1; }
  HUB_URL="http://127.0.0.1:$HUB_PORT"
}

hub_stop() {
  if [ -n "${HUB_PID:-}" ]; then
    kill "$HUB_PID" 2>/dev/null
    wait "$HUB_PID" 2>/dev/null
    HUB_PID=""
  fi
  rm -f "${HUB_LOG:-}"
}
