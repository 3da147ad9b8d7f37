#!/usr/bin/env bash
# e2e: the llmr-render CLI renders real goldens byte for byte and reports template errors.
# Uses tests/data/templates (copied from /work/shared/reference/templates; see ORIGIN.md there).
set -uo pipefail
BIN="${LLMR_BUILD:-build}/bin/llmr-render"
[ -x "$BIN" ] || { echo "SKIP: $BIN not built"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not available to read the goldens"; exit 77; }
D=tests/data/templates
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0

"$BIN" --help | grep -q -- '--template' || { echo "FAIL: --help"; fail=1; }
"$BIN" >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: no arguments should exit 2"; fail=1; }

# every golden of the gpt-oss and Llama 3.1 templates, byte for byte (cmp, no newline added)
python3 - "$D" "$tmp" <<'PY'
import json, sys, os
d, tmp = sys.argv[1], sys.argv[2]
g = json.load(open(f"{d}/goldens/llama.cpp-templates-goldens.json"))["goldens"]
n = 0
for i, x in enumerate(g):
    if not any(k in x["template"] for k in ("gpt-oss", "Llama-3.1", "gemma-2")): continue
    ctx = json.load(open(f"{d}/goldens/contexts/{x['context']}.json"))
    for k in ("bos_token", "eos_token"):
        if x.get(k) is not None: ctx[k] = x[k]
    json.dump(ctx, open(f"{tmp}/{i}.ctx.json", "w"))
    open(f"{tmp}/{i}.tpl", "w").write(f"{d}/{x['template']}")
    if "expected" in x: open(f"{tmp}/{i}.expected", "wb").write(x["expected"].encode())
    else: open(f"{tmp}/{i}.error", "w").write(x["expected_error"].split(": ", 1)[1])
    n += 1
print(f"{n} cases")
PY
cases=0
for ctx in "$tmp"/*.ctx.json; do
  i=$(basename "$ctx" .ctx.json)
  tpl=$(cat "$tmp/$i.tpl")
  "$BIN" --template "$tpl" --context "$ctx" --now 2025-07-10T12:00:00 >"$tmp/$i.out" 2>"$tmp/$i.err"; rc=$?
  cases=$((cases+1))
  if [ -f "$tmp/$i.expected" ]; then
    if [ $rc -ne 0 ] || ! cmp -s "$tmp/$i.out" "$tmp/$i.expected"; then echo "FAIL: golden $i ($tpl) rc=$rc"; fail=1; fi
  else
    if [ $rc -ne 1 ] || ! grep -qF "$(cat "$tmp/$i.error")" "$tmp/$i.err" || [ -s "$tmp/$i.out" ]; then
      echo "FAIL: golden $i ($tpl) should exit 1 with: $(cat "$tmp/$i.error")"; fail=1
    fi
  fi
done

# transformers defaults for absent variables, Python str() of values, and the sandbox
printf '{{ add_generation_prompt }}|{{ tools }}|{{ documents is none }}|{{ x }}|{{ [1, "a"] }}|{{ {"k": true} }}\n' >"$tmp/t.jinja"
echo '{}' >"$tmp/c.json"
out=$("$BIN" --template "$tmp/t.jinja" --context "$tmp/c.json"); 
[ "$out" = "False|None|True||[1, 'a']|{'k': True}" ] || { echo "FAIL: defaults/str(): got '$out'"; fail=1; }
printf '{{ messages.append(1) }}' >"$tmp/t.jinja"
echo '{"messages": []}' >"$tmp/c.json"
"$BIN" --template "$tmp/t.jinja" --context "$tmp/c.json" >/dev/null 2>"$tmp/e"; rc=$?
{ [ $rc -eq 1 ] && grep -q SecurityError "$tmp/e"; } || { echo "FAIL: list.append must be refused (rc=$rc)"; fail=1; }
printf '{%% if x %%}' >"$tmp/t.jinja"
"$BIN" --template "$tmp/t.jinja" --context "$tmp/c.json" >/dev/null 2>"$tmp/e"; rc=$?
{ [ $rc -eq 1 ] && grep -q "line 1" "$tmp/e"; } || { echo "FAIL: syntax error must exit 1 with a position (rc=$rc)"; fail=1; }
printf 'a{%% if true %%}\nb{%% endif %%}' >"$tmp/t.jinja"
out=$("$BIN" --template "$tmp/t.jinja" --context "$tmp/c.json" --no-trim-blocks | od -c | head -1)
echo "$out" | grep -q 'a  \\n   b' || { echo "FAIL: --no-trim-blocks kept the newline? $out"; fail=1; }

[ $fail -eq 0 ] && echo "ok: $cases goldens + CLI behaviour"
exit $fail
