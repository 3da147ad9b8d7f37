#!/usr/bin/env bash
# issue 4, downloads against a misbehaving hub (llmr-hub fault hooks), three models at once:
#   a shard missing on the hub (404)        -> failed, the reason names the shard;
#   a shard always served corrupted         -> caught by sha256, fetched once more, then failed
#                                              naming the file; nothing corrupt left on disk;
#   one shard corrupted once + one dropped  -> refetched / resumed, ready, byte-identical;
#   an architecture no engine runs          -> unsupported with the reason (FR-005), nothing downloaded.
source "$(dirname "$0")/node_lib.sh"
need_bins
setup_engines
make_model
for r in tiny-missing tiny-corrupt tiny-flaky tiny-mystery; do cp -r "$T/hub/$REPO" "$T/hub/openai/$r"; done
jq '.architectures = ["MysteryForCausalLM"] | .model_type = "mystery"' "$T/hub/$REPO/config.json" >"$T/hub/openai/tiny-mystery/config.json"
S3=model-00003-of-00005.safetensors
S5=model-00005-of-00005.safetensors
start_hub "status=404:openai/tiny-missing/$S3;corrupt:openai/tiny-corrupt/$S5;corrupt:openai/tiny-flaky/$S3@1;drop:openai/tiny-flaky/$S5@1"
start_router
start_node --max-parallel-downloads 3
wait_for 15 grep -q "registered with" "$T/node.log" || fail "the node did not register"
for r in tiny-missing tiny-corrupt tiny-flaky tiny-mystery; do
  register_model "openai/$r"
  [ "$REG_STATUS" = 201 ] || fail "registering openai/$r answered $REG_STATUS: $(cat "$T/register.json")"
done

settled() { local s; s=$(router_state "$1"); [ "$s" = ready ] || [ "$s" = failed ] || [ "$s" = unsupported ]; }
for r in tiny-missing tiny-corrupt tiny-flaky tiny-mystery; do
  wait_for 120 settled "openai/$r" || fail "openai/$r did not settle (state $(router_state "openai/$r"))"
done

# missing shard
[ "$(router_state openai/tiny-missing)" = failed ] || fail "tiny-missing is $(router_state openai/tiny-missing)"
reason=$(router_reason openai/tiny-missing)
echo "$reason" | grep -q "$S3" && echo "$reason" | grep -q 404 || fail "the reason does not name the missing shard: $reason"
ok "shard missing on the hub -> failed: $reason"

# corrupted bytes, every time
[ "$(router_state openai/tiny-corrupt)" = failed ] || fail "tiny-corrupt is $(router_state openai/tiny-corrupt)"
reason=$(router_reason openai/tiny-corrupt)
echo "$reason" | grep -q "$S5" && echo "$reason" | grep -q "sha256" && echo "$reason" | grep -q twice \
  || fail "the reason does not name the corrupt file and the hash check: $reason"
[ "$(grep -c "openai/tiny-corrupt: $S5 failed verification" "$T/node.log")" = 1 ] || fail "the corrupt file was not refetched exactly once"
[ ! -e "$T/node/models/openai/tiny-corrupt/$S5" ] && [ ! -e "$T/node/models/openai/tiny-corrupt/$S5.partial" ] \
  || fail "corrupt bytes were left on disk"
ok "corrupted bytes -> caught by sha256, refetched once, failed: $reason"

# corrupted once and dropped once: recovered
[ "$(router_state openai/tiny-flaky)" = ready ] || fail "tiny-flaky is $(router_state openai/tiny-flaky): $(router_reason openai/tiny-flaky)"
grep -q "openai/tiny-flaky: $S3 failed verification" "$T/node.log" || fail "the corrupted-once shard was not caught"
cmp "$T/hub/openai/tiny-flaky/$S3" "$T/node/models/openai/tiny-flaky/$S3" || fail "$S3 differs"
cmp "$T/hub/openai/tiny-flaky/$S5" "$T/node/models/openai/tiny-flaky/$S5" || fail "$S5 differs after the drop"
grep -q "openai/tiny-flaky: $S5 complete after [2-9] attempts" "$T/node.log" || fail "the dropped transfer was not resumed"
ok "corrupted once + dropped mid-file -> refetched and resumed, ready, byte-identical"

# unknown architecture
[ "$(router_state openai/tiny-mystery)" = unsupported ] || fail "tiny-mystery is $(router_state openai/tiny-mystery)"
reason=$(router_reason openai/tiny-mystery)
echo "$reason" | grep -qi "unknown\|Mystery" || fail "the unsupported reason says nothing useful: $reason"
[ ! -e "$T/node/models/openai/tiny-mystery" ] || fail "an unsupported model was downloaded"
ok "no engine for the architecture -> unsupported, nothing downloaded: $reason"

vf=$(curl -s "$NODE/metrics" | sed -n "s/^llmr_node_verify_failures_total //p")
[ "${vf:-0}" -ge 3 ] || fail "verify failures counted in /metrics: ${vf:-none}, expected at least 3"
validate_traces heartbeat node-heartbeat.schema.json
echo PASS
