#!/usr/bin/env bash
# e2e: llmr-router registers models from llmr-hub serving fixture snapshots generated here.
# Covers every failure of issue 3 (format_required, invalid_format, missing_required_file,
# invalid_config, missing_shard, unsafe shard names, ambiguous_artifacts, invalid_chat_template,
# 409, 404, 502), sharded success with every sha256 checked against the fixture files, the
# manifest (schema-valid, URLs pinned to the commit, each URL downloads the exact bytes), the
# artifact allowlist (an allowed org's repo is included, an org outside the list is left out with
# a warning), auth (401/403), and bad input (malformed JSON, wrong types, hostile repo names, 413,
# 404, 405).
set -uo pipefail
cd "$(dirname "$0")/.."
. e2e/lib/hub.sh
. e2e/lib/router.sh
BIN="${LLMR_BUILD:-$(pwd)/build}/bin"
for t in curl jq sha256sum; do command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }; done
[ -x "$BIN/llmr-hub" ] && [ -x "$BIN/llmr-router" ] || { echo "FAIL: build llmr-hub and llmr-router first"; exit 1; }

WORK="$(mktemp -d /tmp/llmr-e2e-router.XXXXXX)"
ROUTER_LOG_FILE="$WORK/router.log"
cleanup() { router_stop; hub_stop; rm -rf "$WORK"; }
trap cleanup EXIT
fails=0
ok()   { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails+1)); }
check() { local what="$1"; shift; if "$@" >/dev/null; then ok "$what"; else fail "$what"; fi; }
# expect STATUS CODE WHAT: the last rreq answered STATUS with error.code CODE ("-" = no check)
expect() {
  local code; code=$(echo "$BODY" | jq -r '.error.code // empty' 2>/dev/null)
  if [ "$ST" = "$1" ] && { [ "$2" = "-" ] || [ "$code" = "$2" ]; }; then ok "$3"
  else fail "$3: got $ST $code: $(echo "$BODY" | head -c 400)"; fi
}
err_has() { echo "$BODY" | jq -e "$1" >/dev/null 2>&1; }
jbody() { echo "$BODY" | jq -e "$1" >/dev/null 2>&1; }
msg_has() { echo "$BODY" | jq -r .error.message | grep -qF -- "$1"; }

# --- fixtures -----------------------------------------------------------------------------
ROOT="$WORK/hub"
router_make_repo "$ROOT" openai/gpt-oss-20b sharded
mkdir -p "$ROOT/nvidia/gpt-oss-20b-cuda/cuda"; head -c 777 /dev/urandom > "$ROOT/nvidia/gpt-oss-20b-cuda/cuda/model.bin"
mkdir -p "$ROOT/evil/gpt-oss-20b-rocm"; head -c 555 /dev/urandom > "$ROOT/evil/gpt-oss-20b-rocm/rocm.bin"
router_make_repo "$ROOT" test/single single
router_make_repo "$ROOT" test/single2 single
mkdir -p "$ROOT/test/nofiles"; hub_make_safetensors "$ROOT/test/nofiles/model.safetensors" 64
router_make_repo "$ROOT" test/notok single; rm "$ROOT/test/notok/tokenizer.json"
router_make_repo "$ROOT" test/badconfig single; echo '{"hidden_size":8}' > "$ROOT/test/badconfig/config.json"
router_make_repo "$ROOT" test/brokenjson single; echo '{"architectures":[' > "$ROOT/test/brokenjson/config.json"
router_make_repo "$ROOT" test/missingshard sharded; rm "$ROOT/test/missingshard/model-00002-of-00002.safetensors"
router_make_repo "$ROOT" test/unsafe sharded
printf '{"weight_map":{"w":"../../../etc/passwd","w2":"model-00002-of-00002.safetensors"}}\n' > "$ROOT/test/unsafe/model.safetensors.index.json"
router_make_repo "$ROOT" test/ambiguous single; hub_make_safetensors "$ROOT/test/ambiguous/extra.safetensors" 64
router_make_repo "$ROOT" test/both single; head -c 100 /dev/urandom > "$ROOT/test/both/model-q4.gguf"
router_make_repo "$ROOT" test/gguf2 single; rm "$ROOT/test/gguf2/model.safetensors"
head -c 100 /dev/urandom > "$ROOT/test/gguf2/a-q4.gguf"; head -c 120 /dev/urandom > "$ROOT/test/gguf2/b-q8.gguf"
router_make_repo "$ROOT" test/badtemplate single; printf 'hello\n{%% for m in messages %%}{{ m.content }\n' > "$ROOT/test/badtemplate/chat_template.jinja"
router_make_repo "$ROOT" test/unknownarch single; echo '{"architectures":["FooForCausalLM"]}' > "$ROOT/test/unknownarch/config.json"
router_make_repo "$ROOT" test/pinned single; echo 0123456789abcdef0123456789abcdef01234567 > "$ROOT/test/pinned/.commit"
cat > "$WORK/supported_models.json" <<'JSON'
{"models":[{"id":"openai/gpt-oss-20b","runtime":"gptoss","artifacts":[
  {"backend":"metal","source_repo":"openai/gpt-oss-20b","path":"metal/model.bin","name":"model.metal.bin"},
  {"backend":"cuda","source_repo":"nvidia/gpt-oss-20b-cuda","path":"cuda/model.bin","name":"model.cuda.bin"},
  {"backend":"rocm","source_repo":"evil/gpt-oss-20b-rocm","path":"rocm.bin","name":"model.rocm.bin"},
  {"backend":"vulkan","source_repo":"openai/gpt-oss-20b","path":"vulkan/absent.bin","name":"model.vulkan.bin"}]}]}
JSON

# a synthetic gpt-oss checkpoint in the real Hugging Face layout, when llmr-mkmodel is built
HAVE_MK=0
mkdir -p "$ROOT/synth"
if [ -x "$BIN/llmr-mkmodel" ] && "$BIN/llmr-mkmodel" --preset tiny --seed 7 --out "$ROOT/synth/gpt-oss-tiny" >"$WORK/mk.log" 2>&1; then HAVE_MK=1; fi
hub_start "$ROOT" --cache "$WORK/hubcache" || exit 1
ADMIN=admin-key-e2e-0123456789
router_start "$WORK/data" --admin-key "$ADMIN" --hub-endpoint "$HUB_URL" --supported-models "$WORK/supported_models.json" \
  --artifact-allowlist 'openai/*,nvidia/*' || exit 1
reg() { rreq POST /v0/models/register "$ADMIN" "$1"; }

# --- auth ------------------------------------------------------------------------------------
rreq POST /v0/models/register "" '{"repo":"test/single"}';            expect 401 missing_api_key "no key: 401"
rreq POST /v0/models/register "wrong-key-0000000000" '{"repo":"test/single"}'; expect 401 invalid_api_key "wrong key: 401"
rreq POST /v0/api-keys "$ADMIN" '{"name":"e2e"}';                     expect 201 - "admin creates an API key"
APIKEY=$(echo "$BODY" | jq -r .key)
check "API key shown once, with its prefix" test "${APIKEY:0:8}" = "sk-llmr-"
rreq POST /v0/models/register "$APIKEY" '{"repo":"test/single"}';     expect 403 wrong_key_kind "API key on an admin route: 403"
rreq GET /v0/api-keys "$ADMIN"
check "key list hides the key" jbody '.data[0].prefix and (.data[0].key == null)'

# --- sharded success ------------------------------------------------------------------------
reg '{"repo":"openai/gpt-oss-20b","format":"safetensors","display_name":"GPT-OSS 20B"}'
expect 201 - "sharded gpt-oss registers"
echo "$BODY" > "$WORK/rec.json"
COMMIT=$(curl -s "$HUB_URL/api/models/openai/gpt-oss-20b/revision/main" | jq -r .sha)
R="$ROOT/openai/gpt-oss-20b"
check "id is the lower-cased repo" test "$(jq -r .id "$WORK/rec.json")" = "openai/gpt-oss-20b"
check "commit is the hub's resolved sha" test "$(jq -r .commit "$WORK/rec.json")" = "$COMMIT"
check "revision main" test "$(jq -r .revision "$WORK/rec.json")" = main
check "runtime gptoss from GptOssForCausalLM" test "$(jq -r .runtime "$WORK/rec.json")" = gptoss
check "display_name kept" test "$(jq -r .display_name "$WORK/rec.json")" = "GPT-OSS 20B"
check "template from chat_template.jinja" test "$(jq -r .chat_template.source "$WORK/rec.json")" = chat_template.jinja
check "template sha256 = the file's" test "$(jq -r .chat_template.sha256 "$WORK/rec.json")" = "$(sha256sum "$R/chat_template.jinja" | cut -c1-64)"
check "7 files (not original/, not metal/)" test "$(jq '.files|length' "$WORK/rec.json")" = 7
check "created_at set" jq -e '.created_at > 1700000000' "$WORK/rec.json"
check "VRAM estimate present" jq -e '.vram_estimate_bytes > 6144' "$WORK/rec.json"
total=0; good=1
for name in $(jq -r '.files[].name' "$WORK/rec.json"); do
  want=$(sha256sum "$R/$name" | cut -c1-64); size=$(stat -c %s "$R/$name")
  got=$(jq -r --arg n "$name" '.files[]|select(.name==$n)|.sha256' "$WORK/rec.json")
  gsize=$(jq -r --arg n "$name" '.files[]|select(.name==$n)|.size' "$WORK/rec.json")
  [ "$want" = "$got" ] && [ "$size" = "$gsize" ] || { good=0; echo "  $name: $got/$gsize want $want/$size"; }
  total=$((total+size))
done
check "every file's sha256 and size match the fixture (LFS oid and router-hashed)" test $good = 1
check "total size" test "$(jq .total_size_bytes "$WORK/rec.json")" = $total
check "artifact from the same repo (openai/*) included" jq -e '.artifacts|map(select(.name=="model.metal.bin" and .backend=="metal"))|length==1' "$WORK/rec.json"
check "artifact from another allowed org (nvidia/*) included" jq -e '.artifacts|map(select(.source_repo=="nvidia/gpt-oss-20b-cuda"))|length==1' "$WORK/rec.json"
check "artifact from an org outside the allowlist left out" jq -e '.artifacts|map(select(.source_repo=="evil/gpt-oss-20b-rocm"))|length==0' "$WORK/rec.json"
check "... with a warning naming it" jq -e '.warnings|map(select(test("evil/gpt-oss-20b-rocm.*allowlist")))|length==1' "$WORK/rec.json"
check "absent artifact left out with a warning" jq -e '.warnings|map(select(test("vulkan/absent.bin")))|length==1' "$WORK/rec.json"
check "metal artifact sha256 = the file's" test "$(jq -r '.artifacts[]|select(.backend=="metal")|.sha256' "$WORK/rec.json")" = "$(sha256sum "$R/metal/model.bin" | cut -c1-64)"
check "format stays safetensors" test "$(jq -r .format "$WORK/rec.json")" = safetensors

# --- a llmr-mkmodel checkpoint (real layout: sharded, real template and tokenizer when cached) -------
if [ $HAVE_MK = 1 ]; then
  reg '{"repo":"synth/gpt-oss-tiny"}'; expect 201 - "llmr-mkmodel tiny checkpoint registers"
  M="$ROOT/synth/gpt-oss-tiny"
  check "runtime gptoss" jbody '.runtime=="gptoss" and .architecture=="GptOssForCausalLM"'
  nfiles=$(cd "$M" && ls | grep -E '^(config.json|tokenizer.json|tokenizer_config.json|generation_config.json|special_tokens_map.json|chat_template.jinja|model.safetensors.index.json|model-[0-9]+-of-[0-9]+.safetensors)$' | wc -l)
  check "every checkpoint file in the record ($nfiles)" jbody ".files|length==$nfiles"
  good=1
  for name in $(echo "$BODY" | jq -r '.files[].name'); do
    [ "$(sha256sum "$M/$name" | cut -c1-64)" = "$(echo "$BODY" | jq -r --arg n "$name" '.files[]|select(.name==$n)|.sha256')" ] || { good=0; echo "  $name differs"; }
  done
  check "every sha256 matches the checkpoint's bytes" test $good = 1
else
  echo "skip llmr-mkmodel checkpoint registration (llmr-mkmodel not built or failed: $(tail -1 "$WORK/mk.log" 2>/dev/null))"
fi

# --- 409: the existing record stays untouched -----------------------------------------------
rreq GET /v0/models/openai/gpt-oss-20b "$ADMIN"; before=$(echo "$BODY" | jq -cS 'del(.nodes,.ready)')
reg '{"repo":"openai/GPT-OSS-20B","format":"safetensors","display_name":"other"}'
expect 409 model_already_registered "second registration: 409"
rreq GET /v0/models/openai/gpt-oss-20b "$ADMIN"; after=$(echo "$BODY" | jq -cS 'del(.nodes,.ready)')
check "existing record untouched" test "$before" = "$after"
check "GET equals the 201 record" test "$after" = "$(jq -cS . "$WORK/rec.json")"

# --- manifest ---------------------------------------------------------------------------------
rreq POST /v0/nodes "" '{"machine_name":"e2e-gpu","address":"127.0.0.1","port":9,"gpus":[{"index":0,"name":"H100","memory_total_bytes":85899345920}],"engines":[{"id":"gptoss-cuda","version":"1","runtimes":["gptoss"],"formats":["safetensors"]}]}'
expect 201 - "a GPU node registers"
NODETOK=$(echo "$BODY" | jq -r .node_token)
rreq GET /v0/models/registry/openai/gpt-oss-20b/manifest.json "$NODETOK"; expect 200 - "manifest with the node token"
echo "$BODY" > "$WORK/manifest.json"
if node e2e/lib/validate_schema.js schema/model-manifest.schema.json "$WORK/manifest.json"; then ok "manifest matches schema/model-manifest"
else rc=$?; [ $rc = 77 ] && echo "skip manifest schema check (no ajv)" || fail "manifest matches schema/model-manifest"; fi
check "manifest file URLs pinned to the commit" jq -e --arg c "$COMMIT" '.files|all(.url|contains("/resolve/"+$c+"/"))' "$WORK/manifest.json"
check "artifact URLs pinned to their repo's commit" jq -e '.artifacts|all(.url|test("/resolve/[0-9a-f]{40}/"))' "$WORK/manifest.json"
check "artifacts optional, files not" jq -e '(.artifacts|all(.optional==true)) and (.files|all(.optional==false))' "$WORK/manifest.json"
dl_ok=1
for i in $(seq 0 $(( $(jq '.files|length' "$WORK/manifest.json") - 1 ))); do
  url=$(jq -r ".files[$i].url" "$WORK/manifest.json"); want=$(jq -r ".files[$i].sha256" "$WORK/manifest.json")
  got=$(curl -sf "$url" | sha256sum | cut -c1-64)
  [ "$got" = "$want" ] || { dl_ok=0; echo "  $url: $got != $want"; }
done
check "every manifest URL serves the exact bytes" test $dl_ok = 1
rreq GET /v0/models/registry/openai/gpt-oss-20b/manifest.json "$ADMIN";  expect 200 - "manifest with the admin key"
rreq GET /v0/models/registry/openai/gpt-oss-20b/manifest.json "$APIKEY"; expect 403 wrong_key_kind "manifest with an API key: 403"
rreq GET /v0/models/registry/openai/gpt-oss-20b/manifest.json "";        expect 401 missing_api_key "manifest without a key: 401"
rreq GET /v0/models/registry/test/nothere/manifest.json "$NODETOK";       expect 404 model_not_found "manifest of an unknown model: 404"
rreq GET /v0/models/registry/openai/gpt-oss-20b/other.json "$NODETOK";    expect 404 - "unknown registry route: 404"

# --- single file, format inferred; pinned .commit --------------------------------------------
reg '{"repo":"test/single"}';  expect 201 - "single .safetensors without index, format inferred"
check "inferred format safetensors" test "$(echo "$BODY" | jq -r .format)" = safetensors
reg '{"repo":"test/pinned","revision":"0123456789abcdef0123456789abcdef01234567"}'; expect 201 - "registration at a commit sha"
check "commit recorded" test "$(echo "$BODY" | jq -r .commit)" = 0123456789abcdef0123456789abcdef01234567

# --- every failure ------------------------------------------------------------------------------
reg '{"repo":"test/both"}';                          expect 400 format_required "both .safetensors and .gguf, no format"
err_has '.error.param=="format"' && ok "format_required names the param" || fail "format_required param"
reg '{"repo":"test/both","format":"onnx"}';          expect 400 invalid_format "unknown format"
reg '{"repo":"test/nofiles"}';                       expect 400 missing_required_file "config.json and tokenizer.json missing"
check "missing lists both" jbody '.error.missing==["config.json","tokenizer.json"]'
check "message names both" msg_has 'config.json, tokenizer.json'
reg '{"repo":"test/notok"}';                         expect 400 missing_required_file "tokenizer.json missing"
check "missing lists only tokenizer.json" jbody '.error.missing==["tokenizer.json"]'
reg '{"repo":"test/badconfig"}';                     expect 400 invalid_config "config.json without architectures/model_type"
reg '{"repo":"test/brokenjson"}';                    expect 400 invalid_config "config.json that does not parse"
reg '{"repo":"test/missingshard"}';                  expect 400 missing_shard "index names an absent shard"
check "missing_shard names it" jbody '.error.missing==["model-00002-of-00002.safetensors"]'
reg '{"repo":"test/unsafe"}';                        expect 400 unsafe_file_name "index names an unsafe shard path"
check "unsafe name listed" jbody '.error.files==["../../../etc/passwd"]'
reg '{"repo":"test/ambiguous"}';                     expect 400 ambiguous_artifacts "several .safetensors, no index"
check "ambiguous lists them" jbody '.error.files|length==2'
reg '{"repo":"test/gguf2","format":"gguf"}';         expect 400 ambiguous_artifacts "several .gguf without filename"
reg '{"repo":"test/gguf2","format":"gguf","filename":"b-q8.gguf"}'; expect 201 - "gguf with filename"
check "gguf warns that no engine ships" jbody '.warnings|map(select(test("GGUF")))|length==1'
reg '{"repo":"test/both","format":"gguf"}';          expect 201 - "gguf: exactly one .gguf"
reg '{"repo":"test/unknownarch"}';                   expect 201 - "unknown architecture registers"
check "runtime unknown + warning" jbody '.runtime=="unknown" and (.warnings|map(select(test("FooForCausalLM")))|length==1)'
reg '{"repo":"nobody/nothing"}';                     expect 404 repo_not_found "unknown repo: 404"
reg '{"repo":"test/single2","revision":"v9"}';       expect 404 repo_not_found "unknown revision: 404"
# chat templates: strict when the Jinja engine is built in
if grep -q "not parse-checked" "$WORK/rec.json"; then
  echo "skip chat template parse checks: this build has no Jinja engine (router/template not merged)"
else
  reg '{"repo":"test/badtemplate"}';                 expect 400 invalid_chat_template "broken chat_template.jinja"
  check "error position given" jbody '.error.line>=1 and .error.column>=1'
  reg '{"repo":"test/single2","chat_template":"{% if x %}never closed"}'; expect 400 invalid_chat_template "broken template in the request"
  check "param chat_template" jbody '.error.param=="chat_template"'
fi

# --- bad input ------------------------------------------------------------------------------------
reg '{"repo":';                                      expect 400 - "malformed JSON: 400"
reg '[1,2]';                                         expect 400 - "a JSON array body: 400"
reg '{}';                                            expect 400 missing_field "repo missing"
reg '{"repo":42}';                                   expect 400 invalid_type "repo not a string"
reg '{"repo":"test/single2","format":["x"]}';        expect 400 invalid_type "format not a string"
reg '{"repo":"org/x\u0000y"}';                      expect 400 - "NUL in the repo name: 400"
reg '{"repo":"test/single2","revision":5}';          expect 400 invalid_type "revision not a string"
for bad in '../../etc/passwd' 'a b/c' 'a/b/c' 'a/..' '..' 'org/' '/name' 'org/na me' 'org/x%2F..' 'org/x\u0001y'; do
  reg "{\"repo\":\"$bad\"}"; expect 400 invalid_repo "hostile repo name '$bad'"
done
reg '{"repo":"test/single2","revision":"../../x"}';  expect 400 invalid_revision "hostile revision"
# request bodies: up to --max-request-mb (default 8 MiB; a full-context chat request needs ~2) reach the
# handler, larger ones get 413 naming the limit
head -c 1100000 /dev/zero | tr '\0' 'a' | sed 's/^/{"repo":"test\/single2","display_name":"/; s/$/"}/' > "$WORK/big.json"
reg "@$WORK/big.json";                               expect 400 invalid_value "a 1.1 MB body reaches validation (display_name too long)"
check "the 400 names the field" jbody '.error.param == "display_name"'
head -c 9000000 /dev/zero | tr '\0' 'a' | sed 's/^/{"repo":"test\/single2","display_name":"/; s/$/"}/' > "$WORK/big.json"
reg "@$WORK/big.json";                               expect 413 request_too_large "body over 8 MiB: 413"
check "the 413 names the limit" msg_has "8388608-byte limit"
rreq GET /v0/nope "$ADMIN";                          expect 404 - "unknown route: 404 JSON"
check "404 is OpenAI-style JSON" jbody '.error.type and .error.message'
rreq PUT /v0/models/register "$ADMIN" '{}';          expect 405 - "PUT on register: 405"
rreq GET /v0/models/register "$ADMIN";               expect 405 method_not_allowed "GET on register: 405"
rreq DELETE /v0/models/registry/openai/gpt-oss-20b/manifest.json "$ADMIN"; expect 405 method_not_allowed "DELETE on a manifest: 405"
rreq GET '/v0/models/..%2F..%2Fetc' "$ADMIN";        expect 400 invalid_repo "hostile path id: 400"
rreq GET /v0/models/test/absent "$ADMIN";            expect 404 model_not_found "unknown model: 404"
check "router still alive after bad input" kill -0 "$ROUTER_PID"

# --- list, delete --------------------------------------------------------------------------------
rreq GET /v0/models "$ADMIN"
check "GET /v0/models lists the $((6 + HAVE_MK)) registered" test "$(echo "$BODY" | jq '.data|length')" = $((6 + HAVE_MK))
rreq GET /v0/models "$NODETOK"; expect 200 - "nodes may list models (their poll)"
rreq DELETE /v0/models/test/single "$APIKEY";        expect 403 wrong_key_kind "delete with an API key: 403"
rreq DELETE /v0/models/Test/Single "$ADMIN";         expect 200 - "delete"
rreq GET /v0/models/test/single "$ADMIN";            expect 404 model_not_found "deleted model is gone"
rreq DELETE /v0/models/test/single "$ADMIN";         expect 404 model_not_found "second delete: 404"
reg '{"repo":"test/single"}';                        expect 201 - "re-register after delete"
rreq DELETE "/v0/api-keys/$(curl -s -H "Authorization: Bearer $ADMIN" "$ROUTER_URL/v0/api-keys" | jq -r '.data[0].id')" "$ADMIN"
expect 200 - "API key deleted"
rreq GET /v1/models "$APIKEY";                        expect 401 invalid_api_key "deleted API key: 401"

# --- hub unreachable: 502 naming the hub --------------------------------------------------------
hub_url_was="$HUB_URL"; hub_stop
reg '{"repo":"test/never"}';                         expect 502 hub_unreachable "hub down: 502"
check "502 names the hub URL" msg_has "$hub_url_was"

# --- a restart keeps everything -------------------------------------------------------------------
router_stop
router_start "$WORK/data" --admin-key "$ADMIN" --hub-endpoint "$hub_url_was" --supported-models "$WORK/supported_models.json" || exit 1
rreq GET /v0/models/openai/gpt-oss-20b "$ADMIN"
check "record intact after restart" test "$(echo "$BODY" | jq -cS 'del(.nodes,.ready)')" = "$(jq -cS . "$WORK/rec.json")"
rreq GET /v0/models/registry/openai/gpt-oss-20b/manifest.json "$NODETOK"; expect 200 - "node token still valid after restart"

echo "router log:"; tail -5 "$WORK/router.log"
if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all router registration checks passed"
