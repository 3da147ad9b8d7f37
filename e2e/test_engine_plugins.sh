#!/usr/bin/env bash
# The engine host as an operator meets it, through `llmr-engines`: a plugin folder with the test
# plugin and broken plugins (each rejected naming the field or the ABI check), engine selection with
# and without an official artifact (FR-008), an unsupported model with its reason, GPU inventory
# with and without NVML (a fake libnvidia-ml stands in for the driver), and /metrics text.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD="${LLMR_BUILD:-build}"
TOOL="$BUILD/bin/llmr-engines"
PLUGIN="$BUILD/tests/plugins/testengine"
[ -x "$TOOL" ] && [ -f "$PLUGIN/libtestengine.so" ] || { echo "FAIL: build first ($TOOL, $PLUGIN)"; exit 1; }
tmp=$(mktemp -d /tmp/llmr-plugins-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
CHECK_LINES=0 # the whole output of a failed check
. e2e/lib/check.sh

mkdir -p "$tmp/engines/testengine" "$tmp/engines/abi2" "$tmp/engines/typo"
cp "$PLUGIN/manifest.json" "$PLUGIN/libtestengine.so" "$tmp/engines/testengine/"
sed 's/"abi_version": "1.0"/"abi_version": "2.0"/' "$PLUGIN/manifest.json" > "$tmp/engines/abi2/manifest.json"
cp "$PLUGIN/libtestengine.so" "$tmp/engines/abi2/"
sed 's/"runtimes"/"runtime"/' "$PLUGIN/manifest.json" > "$tmp/engines/typo/manifest.json"

check "--help" 0 "usage: llmr-engines" -- "$TOOL" --help
check "bad command" 2 "unknown command" -- "$TOOL" frobnicate
check "list" 1 "engine testengine 1.0.0 ABI 1.0" -- "$TOOL" list --engines-dir "$tmp/engines"
check "abi rejected" 1 'abi2/manifest.json: field "abi_version": plugin declares ABI 2.0, host speaks 1.1' -- "$TOOL" list --engines-dir "$tmp/engines"
check "typo rejected" 1 'typo/manifest.json: field "runtime": unknown field' -- "$TOOL" list --engines-dir "$tmp/engines"
check "plugin side ABI" 1 "the library refused host ABI 1.1" -- env TESTENGINE_ABI=3.0 "$TOOL" list --engines-dir "$tmp/engines"
check "missing dir" 2 "No such file" -- "$TOOL" list --engines-dir "$tmp/nope"
rm -rf "$tmp/engines/abi2" "$tmp/engines/typo"
check "clean list" 0 "engine testengine" -- "$TOOL" list --engines-dir "$tmp/engines"
check "select safetensors" 0 "engine testengine" -- "$TOOL" select --engines-dir "$tmp/engines" --id m --architecture TestForCausalLM --runtime test
check "select artifact" 0 "engine testengine artifact /a/model.bin" -- "$TOOL" select --engines-dir "$tmp/engines" --id m --architecture TestForCausalLM --artifact test/model.bin=/a/model.bin
check "unsupported" 1 "testengine: architecture LlamaForCausalLM not in [TestForCausalLM]" -- "$TOOL" select --engines-dir "$tmp/engines" --id m --architecture LlamaForCausalLM
check "wrong backend" 1 "backend metal not in [cuda, cpu]" -- "$TOOL" select --engines-dir "$tmp/engines" --backend metal --id m --architecture TestForCausalLM
check "no NVML" 1 "no NVML: " -- env LLMR_NVML_LIB=/nonexistent/libnvidia-ml.so.1 "$TOOL" gpus
check "fake NVML" 0 "gpu 0 GPU-fake-0000 Fake GPU 0 cc 9.0" -- env LLMR_NVML_LIB="$PLUGIN/libtestengine.so" "$TOOL" gpus
check "metrics" 0 'llmr_engine_plugin_info{engine="testengine",version="1.0.0",abi="1.0",state="active"} 1' -- "$TOOL" metrics --engines-dir "$tmp/engines"
check "metrics vram via NVML" 0 "llmr_node_vram_used_bytes 123" -- env LLMR_NVML_LIB="$PLUGIN/libtestengine.so" FAKE_NVML_USED=123 "$TOOL" metrics --engines-dir "$tmp/engines"
check "metrics alert" 0 'llmr_node_memory_alert{resource="vram"} 1' -- env LLMR_NVML_LIB="$PLUGIN/libtestengine.so" FAKE_NVML_TOTAL=100 FAKE_NVML_USED=95 "$TOOL" metrics --engines-dir "$tmp/engines"
# the heartbeat part, completed with what the node adds, matches schema/node-heartbeat.schema.json
CACHE="${LLMR_CACHE:-$HOME/.cache/llmr}"
if command -v node >/dev/null && [ -d "$CACHE/npm/node_modules/ajv" ]; then
  env LLMR_NVML_LIB="$PLUGIN/libtestengine.so" FAKE_NVML_TOTAL=100 FAKE_NVML_USED=95 \
    "$TOOL" heartbeat --engines-dir "$tmp/engines" > "$tmp/hb.json" || { echo "FAIL heartbeat: rc=$?"; fail=1; }
  if NODE_PATH="$CACHE/npm/node_modules" node -e '
    const Ajv = require("ajv"); const fs = require("fs");
    const hb = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
    hb.node_id = "n1"; hb.active_requests = 0;
    const v = new Ajv({strict: false}).compile(JSON.parse(fs.readFileSync("schema/node-heartbeat.schema.json", "utf8")));
    if (!v(hb)) { console.log(JSON.stringify(v.errors)); process.exit(1); }
    if (hb.alerts[0] !== "vram_high: VRAM use 95.0% >= 90%" || hb.gpus[0].memory_free_bytes !== 5) process.exit(2);' "$tmp/hb.json"
  then echo "ok   heartbeat matches node-heartbeat schema"
  else echo "FAIL heartbeat:"; cat "$tmp/hb.json"; fail=1; fi
else
  echo "note: node/ajv missing: heartbeat schema check not run"
fi
exit $fail
