#!/usr/bin/env bash
# issue 9, node side: POST /v0/generate streams tokens back as SSE events (schema/node-generate.*):
# prompt text tokenized with the model's tokenizer.json, deltas as produced, a done event with usage;
# the same seed gives the same text; a stop string ends the text right before it (finish "stop");
# bad requests and a missing token are refused; a client that disconnects cancels the generation.
source "$(dirname "$0")/node_lib.sh"
need_bins
setup_engines
make_model
# The test engine reads MODEL_DIR/testengine.json (real engines ignore it): the gpt-oss vocabulary,
# and 20 ms per token so a generation lasts long enough to be abandoned. The node leaves files it
# did not download alone.
mkdir -p "$T/node/models/$REPO"
echo '{"token_delay_ms": 20, "vocab": 201088}' >"$T/node/models/$REPO/testengine.json"
start_hub
start_router
start_node --max-concurrency 2
wait_for 15 grep -q "registered with" "$T/node.log" || fail "the node did not register"
register_model "$REPO"
[ "$REG_STATUS" = 201 ] || fail "registration answered $REG_STATUS"
wait_for 90 state_is "$REPO" ready || fail "model not ready: $(router_state "$REPO") $(router_reason "$REPO")"
TOKEN=$(jq -r .node_token "$T/node/state/node.json")

gen() { # gen OUTFILE JSON [curl args]: the SSE stream's data lines, one JSON per line
  local out=$1 body=$2; shift 2
  curl -sN -X POST "$NODE/v0/generate" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d "$body" "$@" | sed -n 's/^data: //p' >"$out"
}
text_of() { jq -rj 'select(.type == "delta") | .content // empty' "$1"; }

code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$NODE/v0/generate" -d '{"model":"x","prompt":"hi"}')
[ "$code" = 401 ] || fail "no token: $code"

gen "$T/g1.jsonl" "{\"model\":\"$REPO\",\"prompt\":\"<|start|>user<|message|>Hello<|end|><|start|>assistant\",\"max_tokens\":24,\"seed\":5,\"parse\":\"none\"}"
[ "$(tail -1 "$T/g1.jsonl" | jq -r .type)" = done ] || fail "no done event: $(tail -3 "$T/g1.jsonl")"
[ "$(grep -c '"type":"delta"' "$T/g1.jsonl")" -ge 2 ] || fail "tokens were not streamed as deltas"
jq -e 'select(.type == "done") | .usage.completion_tokens >= 1 and .usage.prompt_tokens >= 5' "$T/g1.jsonl" >/dev/null || fail "bad usage: $(tail -1 "$T/g1.jsonl")"
TEXT1=$(text_of "$T/g1.jsonl")
ok "streamed $(grep -c '"type":"delta"' "$T/g1.jsonl") deltas, $(tail -1 "$T/g1.jsonl" | jq -c .usage), finish $(tail -1 "$T/g1.jsonl" | jq -r .finish_reason)"

gen "$T/g2.jsonl" "{\"model\":\"$REPO\",\"prompt\":\"<|start|>user<|message|>Hello<|end|><|start|>assistant\",\"max_tokens\":24,\"seed\":5,\"parse\":\"none\"}"
[ "$TEXT1" = "$(text_of "$T/g2.jsonl")" ] || fail "same seed, different text"
ok "same seed, same text"

# A stop string taken from the middle of that text: the output ends right before it.
STOP=$(jq -rn --arg t "$TEXT1" '$t[5:8]')
if [ -n "$STOP" ] && printf '%s' "$STOP" | jq -Rse 'length > 0' >/dev/null; then
  body=$(jq -nc --arg m "$REPO" --arg s "$STOP" '{model:$m, prompt:"<|start|>user<|message|>Hello<|end|><|start|>assistant", max_tokens:24, seed:5, parse:"none", stop:[$s]}')
  gen "$T/g3.jsonl" "$body"
  TEXT3=$(text_of "$T/g3.jsonl")
  EXPECT=${TEXT1%%"$STOP"*}
  [ "$TEXT3" = "$EXPECT" ] || fail "stop string: got [$TEXT3], expected [$EXPECT]"
  [ "$(tail -1 "$T/g3.jsonl" | jq -r .finish_reason)" = stop ] || fail "stop string: finish $(tail -1 "$T/g3.jsonl")"
  ok "stop string ends the text before it (finish stop)"
fi

# harmony parsing (the default) and prompt_ids
gen "$T/g4.jsonl" "{\"model\":\"$REPO\",\"prompt_ids\":[200006,1428,200008,13225,200007,200006,173781],\"max_tokens\":8,\"seed\":1}"
[ "$(tail -1 "$T/g4.jsonl" | jq -r .type)" = done ] || fail "prompt_ids: $(tail -2 "$T/g4.jsonl")"
ok "prompt_ids with harmony parsing: $(tail -1 "$T/g4.jsonl" | jq -c .)"

# logprobs: one entry per generated token, riding in the deltas (harmony parsing: each names its channel)
gen "$T/g5.jsonl" "{\"model\":\"$REPO\",\"prompt_ids\":[200006,1428,200008,13225,200007,200006,173781],\"max_tokens\":8,\"seed\":1,\"logprobs\":2}"
n_lp=$(jq -s '[.[] | select(.type == "delta") | .logprobs // [] | .[]] | length' "$T/g5.jsonl")
n_tok=$(jq -s '.[-1].usage.completion_tokens' "$T/g5.jsonl")
if [ "$ENGINE_ID" = testengine ]; then # ABI 1.0: the request fails with the reason
  jq -e 'select(.type == "error") | .message | test("cannot report logprobs")' "$T/g5.jsonl" >/dev/null || fail "logprobs on an ABI 1.0 engine: $(tail -1 "$T/g5.jsonl")"
else
  [ "$n_lp" = "$n_tok" ] || fail "logprobs: $n_lp entries for $n_tok tokens: $(cat "$T/g5.jsonl")"
  jq -se '[.[] | select(.type == "delta") | .logprobs // [] | .[] | (.logprob <= 0 and (.top_logprobs | length) == 2 and
          (.channel | IN("content", "reasoning", "tool", "none")))] | all' "$T/g5.jsonl" >/dev/null || fail "logprobs entries: $(cat "$T/g5.jsonl")"
  ok "logprobs: $n_lp entries for $n_tok tokens, channels $(jq -sc '[.[] | .logprobs // [] | .[] | .channel] | unique' "$T/g5.jsonl")"
fi

# errors come as one error event
gen "$T/e1.jsonl" '{"model":"nope/none","prompt":"x"}'
jq -e 'select(.type == "error") | .code == "model_not_found"' "$T/e1.jsonl" >/dev/null || fail "unknown model: $(cat "$T/e1.jsonl")"
gen "$T/e2.jsonl" "{\"model\":\"$REPO\",\"prompt\":\"x\",\"temperature\":7}"
jq -e 'select(.type == "error") | .code == "invalid_request" and (.message | test("temperature"))' "$T/e2.jsonl" >/dev/null || fail "bad temperature: $(cat "$T/e2.jsonl")"
gen "$T/e3.jsonl" "{\"model\":\"$REPO\",\"prompt_ids\":[999999999]}"
jq -e 'select(.type == "error") | .code == "invalid_request"' "$T/e3.jsonl" >/dev/null || fail "unknown id: $(cat "$T/e3.jsonl")"
gen "$T/e4.jsonl" "{not json"
jq -e 'select(.type == "error") | .code == "invalid_request"' "$T/e4.jsonl" >/dev/null || fail "bad JSON: $(cat "$T/e4.jsonl")"
ok "unknown model, out-of-range field, unknown id, bad JSON -> error events"

# a client that goes away cancels the generation (the test engine's 20 ms tokens make it long; the
# reference engine is slow enough on CPU for a 100000-token request)
gen "$T/c1.jsonl" "{\"model\":\"$REPO\",\"prompt\":\"hi\",\"max_tokens\":100000,\"parse\":\"none\"}" --max-time 1
if grep -q '"type":"done"' "$T/c1.jsonl"; then
  echo "note: the generation finished within 1 s ($(tail -1 "$T/c1.jsonl")): cancellation not exercised"
else
  wait_for 10 grep -q "finish cancelled" "$T/node.log" || fail "the generation was not cancelled when the client left"
  idle() { curl -s "$NODE/v0/status" | jq -e '.active_requests == 0'; }
  wait_for 5 idle || fail "active_requests did not return to 0"
  ok "client disconnect -> generation cancelled after $(grep -c '"type":"delta"' "$T/c1.jsonl") deltas, slot freed"
fi

# every event matches the schema
cat "$T"/g*.jsonl "$T"/e*.jsonl | awk -v d="$T/trace" '{ f = sprintf("%s/generate-event-%06d.json", d, NR); print > f }'
validate_traces generate-event node-generate.event.schema.json
echo PASS
