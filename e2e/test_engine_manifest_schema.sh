#!/usr/bin/env bash
# The manifest rules exist twice: schema/engine-manifest.schema.json (for people and tools) and
# node/engine/engine_manifest.c (what the node enforces). This test runs a corpus of good and bad
# manifests through both — Ajv (JSON Schema 2020-12, from the npm fixture cache) and
# `llmr-engines validate` — and fails on any disagreement. Also validates every shipped manifest.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${LLMR_BUILD:-build}"
CACHE="${LLMR_CACHE:-$HOME/.cache/llmr}"
TOOL="$BUILD/bin/llmr-engines"
[ -x "$TOOL" ] || { echo "FAIL: $TOOL not built"; exit 1; }
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
[ -d "$CACHE/npm/node_modules/ajv" ] || { echo "SKIP: ajv not in $CACHE/npm (run make deps)"; exit 77; }

tmp=$(mktemp -d /tmp/llmr-schema-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
base='"id":"gptoss_cuda","version":"1.2.3","abi_version":"1.0","runtimes":["gptoss"],"formats":["safetensors"],"architectures":["GptOssForCausalLM"],"gpu_backends":["cuda"],"library":"libgptoss_cuda.so"'
i=0
add() { i=$((i+1)); printf '%s' "$1" > "$tmp/m$(printf %03d $i).json"; }
add "{$base}"
add "{$base,\"description\":\"x\",\"priority\":7,\"min_compute_capability\":\"8.0\",\"\$schema\":\"s\"}"
add "{$base,\"artifacts\":[{\"name\":\"metal/model.bin\",\"priority\":10}]}"
add '{"id":"a","version":"0.1.0-rc.1+b7","abi_version":"1.3","runtimes":["x"],"formats":[],"architectures":["A"],"gpu_backends":["metal"],"library":"l.so","artifacts":[{"name":"m/model.bin","priority":0}]}'
add '{"id":"a","version":"1.0.0","abi_version":"1.0","runtimes":["x"],"formats":[],"architectures":["A"],"gpu_backends":["cpu"],"library":"l.so"}'
add "[1]"
add '"str"'
add "{$base,\"runtime\":[\"x\"]}"
add "{${base/gptoss_cuda/Bad Id}}"
add "{${base/gptoss_cuda/-lead}}"
add "{${base/1.2.3/1.2}}"
add "{${base/1.2.3/1.2.3-}}"
add "{${base/\"1.0\"/\"1\"}}"
add "{${base/\"1.0\"/1}}"
add "{${base/\"1.0\"/\"10000.0\"}}"
add "{${base/\"1.0\"/\"9999.9999\"}}"
add "{${base/[\"gptoss\"]/[]}}"
add "{${base/[\"gptoss\"]/[\"x\",\"x\"]}}"
add "{${base/[\"gptoss\"]/[\"UPPER\"]}}"
add "{${base/[\"safetensors\"]/[\"onnx\"]}}"
add "{${base/[\"safetensors\"]/[\"gguf\",\"safetensors\"]}}"
add "{${base/[\"GptOssForCausalLM\"]/[\"A B\"]}}"
add "{${base/[\"cuda\"]/[\"tpu\"]}}"
add "{${base/[\"cuda\"]/[]}}"
add "{${base/libgptoss_cuda.so/..}}"
add "{${base/libgptoss_cuda.so/.hidden.so}}"
add "{${base/libgptoss_cuda.so/sub\/l.so}}"
add "{$base,\"artifacts\":[{\"name\":\"../x\",\"priority\":1}]}"
add "{$base,\"artifacts\":[{\"name\":\"a/./b\",\"priority\":1}]}"
add "{$base,\"artifacts\":[{\"name\":\"a//b\",\"priority\":1}]}"
add "{$base,\"artifacts\":[{\"name\":\"/abs\",\"priority\":1}]}"
add "{$base,\"artifacts\":[{\"name\":\"a\",\"priority\":1001}]}"
add "{$base,\"artifacts\":[{\"name\":\"a\",\"priority\":-1}]}"
add "{$base,\"artifacts\":[{\"name\":\"a\"}]}"
add "{$base,\"artifacts\":[{\"name\":\"a\",\"priority\":1,\"x\":1}]}"
add "{$base,\"artifacts\":{}}"
add "{$base,\"artifacts\":[]}"
add "{$base,\"min_compute_capability\":\"sm90\"}"
add "{$base,\"min_compute_capability\":\"100.0\"}"
add "{$base,\"min_compute_capability\":9}"
add "{$base,\"priority\":-1}"
add "{$base,\"priority\":1001}"
add "{$base,\"priority\":\"1\"}"
add "{$base,\"description\":7}"
add '{"version":"1.0.0"}'
add "{${base/\"library\":\"libgptoss_cuda.so\"/\"library\":null}}"

cat > "$tmp/ajv.js" <<'JS'
const Ajv2020 = require("ajv/dist/2020");
const fs = require("fs");
const ajv = new Ajv2020({allErrors: false, strict: true});
const validate = ajv.compile(JSON.parse(fs.readFileSync(process.argv[2], "utf8")));
for (const f of process.argv.slice(3)) {
  let ok;
  try { ok = validate(JSON.parse(fs.readFileSync(f, "utf8"))); } catch (e) { ok = false; }
  console.log((ok ? "OK" : "REJECT") + " " + f);
}
JS
files=$(ls "$tmp"/m*.json)
ajv_out=$(NODE_PATH="$CACHE/npm/node_modules" node "$tmp/ajv.js" schema/engine-manifest.schema.json $files) || { echo "FAIL: ajv could not run"; exit 1; }
fail=0
for f in $files; do
  a=$(echo "$ajv_out" | awk -v f="$f" '$2==f {print $1}')
  c=$("$TOOL" validate "$f" | awk '{print $1}')
  if [ "$a" != "$c" ]; then
    echo "DISAGREE $(basename "$f"): ajv=$a node=$c: $(cat "$f")"
    "$TOOL" validate "$f"
    fail=1
  fi
done
n_ok=$(echo "$ajv_out" | grep -c "^OK")
echo "compared $(echo "$files" | wc -w) manifests ($n_ok valid)"
[ "$n_ok" -ge 5 ] || { echo "FAIL: the valid part of the corpus was rejected"; fail=1; }
# every shipped manifest passes both
for m in engines/*/manifest.json tests/plugins/*/manifest.json; do
  [ -f "$m" ] || continue
  out=$(NODE_PATH="$CACHE/npm/node_modules" node "$tmp/ajv.js" schema/engine-manifest.schema.json "$m")
  case "$out" in OK*) ;; *) echo "FAIL: $m does not match the schema"; fail=1 ;; esac
  "$TOOL" validate "$m" >/dev/null || { echo "FAIL: $m rejected by the node"; "$TOOL" validate "$m"; fail=1; }
done
[ $fail -eq 0 ] && echo "PASS: schema and validator agree"
exit $fail
