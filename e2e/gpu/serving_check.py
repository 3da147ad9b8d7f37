#!/usr/bin/env python3
"""e2e/gpu/serving_check.py - the OpenAI-compatible serving checks of issue 9, driven with the Python
standard library only (the GPU machine has Python but no node/npm). Called by e2e/gpu/serving.sh.

usage: serving_check.py ROUTER_URL API_KEY MODEL
Prints "ok: ..." per check and exits 1 at the first failure."""
import json
import sys
import time
import urllib.error
import urllib.request

BASE, KEY, MODEL = sys.argv[1], sys.argv[2], sys.argv[3]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def post(path, body, key=KEY, stream=False, timeout=300):
    req = urllib.request.Request(BASE + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    try:
        r = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}"), e.headers
    if stream:
        return r.status, r, r.headers
    return r.status, json.loads(r.read()), r.headers


def sse(resp):
    """Yields the JSON of each data line; the string "[DONE]" for the end marker."""
    for raw in resp:
        line = raw.decode().rstrip("\n")
        if not line.startswith("data: "):
            continue
        data = line[6:]
        yield "[DONE]" if data == "[DONE]" else json.loads(data)


msgs = [{"role": "user", "content": "Write one short sentence about the sea."}]
st, full, _ = post("/v1/chat/completions", {"model": MODEL, "messages": msgs, "max_tokens": 48, "seed": 11, "temperature": 0.7})
if st != 200:
    fail("chat: %d %s" % (st, full))
c0 = full["choices"][0]
if full["object"] != "chat.completion" or not full["id"].startswith("chatcmpl-") or c0["message"]["role"] != "assistant":
    fail("chat shape: %s" % full)
u = full["usage"]
if u["total_tokens"] != u["prompt_tokens"] + u["completion_tokens"] or "reasoning_tokens" not in u["completion_tokens_details"]:
    fail("usage: %s" % u)
print("ok: chat: %r reasoning=%r finish=%s usage=%s" % (c0["message"].get("content"), (c0["message"].get("reasoning") or "")[:80],
                                                      c0["finish_reason"], u))

t0 = time.time()
st, resp, _ = post("/v1/chat/completions", {"model": MODEL, "messages": msgs, "max_tokens": 48, "seed": 11, "temperature": 0.7,
                                            "stream": True, "stream_options": {"include_usage": True}}, stream=True)
if st != 200:
    fail("stream: %d %s" % (st, resp))
text, reasoning, chunks, usage, done, ttft = "", "", 0, None, False, None
for ev in sse(resp):
    if ev == "[DONE]":
        done = True
        continue
    if ev.get("usage"):
        usage = ev["usage"]
    for ch in ev["choices"]:
        d = ch["delta"]
        if (d.get("content") or d.get("reasoning")) and ttft is None:
            ttft = time.time() - t0
        text += d.get("content") or ""
        reasoning += d.get("reasoning") or ""
        chunks += 1
if not done or usage is None:
    fail("stream without [DONE] or usage chunk")
if text != (c0["message"].get("content") or ""):
    fail("streamed %r != non-streamed %r (same seed)" % (text, c0["message"].get("content")))
print("ok: stream: %d chunks, first token after %.3f s, text == non-streamed answer" % (chunks, ttft or -1))

st, comp, _ = post("/v1/completions", {"model": MODEL, "prompt": "The capital of France is", "max_tokens": 16, "seed": 3})
if st != 200 or comp["object"] != "text_completion":
    fail("completions: %d %s" % (st, comp))
print("ok: completions: %r" % comp["choices"][0]["text"])

tools = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather of a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
q = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]
st, t1, _ = post("/v1/chat/completions", {"model": MODEL, "messages": q, "tools": tools, "max_tokens": 256, "seed": 1})
if st != 200:
    fail("tools: %d %s" % (st, t1))
calls = t1["choices"][0]["message"].get("tool_calls") or []
call = calls[0] if calls else {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
st, t2, _ = post("/v1/chat/completions", {"model": MODEL, "tools": tools, "max_tokens": 128, "seed": 1, "messages": q + [
    {"role": "assistant", "content": None, "tool_calls": [call]},
    {"role": "tool", "tool_call_id": call["id"], "content": "{\"temp_c\": 21, \"sky\": \"clear\"}"}]})
if st != 200:
    fail("tool result turn: %d %s" % (st, t2))
print("ok: tool round trip: first turn %s (%d call(s): %s), answer: %r" % (
    t1["choices"][0]["finish_reason"], len(calls), call["function"], t2["choices"][0]["message"].get("content")))

for body, status, param in (({"model": MODEL, "messages": msgs, "temperature": "hot"}, 400, "temperature"),
                            ({"model": MODEL, "messages": msgs, "n": 3}, 400, "n"),
                            ({"model": "nobody/none", "messages": msgs}, 404, None)):
    st, e, _ = post("/v1/chat/completions", body)
    if st != status or "error" not in e or (param and e["error"].get("param") != param):
        fail("error case %s: %d %s" % (body, st, e))
st, e, _ = post("/v1/chat/completions", {"model": MODEL, "messages": msgs}, key="sk-llmr-wrong")
if st != 401:
    fail("wrong key: %d" % st)
print("ok: errors: 400 naming the param, 404 model_not_found, 401 wrong key")
