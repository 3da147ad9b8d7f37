#!/usr/bin/env bash
# e2e/gpu/near_tie.py, the GPU serving check's judge of a lone vs batched greedy completion, on answers built here:
# the same tokens pass (exit 0); a parting at a logit near-tie passes (0); a later onset of larger differences, or a
# parting that is no logit near-tie, is a knife-edge (3, which the caller counts); paths that part within the first
# 4 tokens fail (1).
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
T=$(mktemp -d /tmp/llmr-near-tie-XXXXXX)
trap 'rm -rf "$T"' EXIT
command -v python3 >/dev/null || { echo "SKIP python3 is not installed"; exit 77; }
answer() { # $1 file, then tokens as TOKEN:LOGPROB:ALT1=LP,ALT2=LP
  local f=$1; shift
  python3 - "$f" "$@" <<'PY'
import json, sys
toks, lps, tops = [], [], []
for spec in sys.argv[2:]:
    t, lp, alts = spec.split(":")
    toks.append(t); lps.append(float(lp))
    tops.append({a.split("=")[0]: float(a.split("=")[1]) for a in alts.split(",")})
json.dump({"choices": [{"text": "".join(toks), "logprobs": {"tokens": toks, "token_logprobs": lps,
           "top_logprobs": tops, "text_offset": list(range(len(toks)))}}]}, open(sys.argv[1], "w"))
PY
}
judge() { # $1 expected rc, $2 what the line must say, $3 what
  out=$(python3 "$ROOT/e2e/gpu/near_tie.py" "$T/a.json" "$T/b.json"); rc=$?
  [ "$rc" = "$1" ] && grep -q -- "$2" <<<"$out" || { echo "FAIL $3: rc $rc, '$out'"; exit 1; }
  echo "ok   $3: $out"
}
P="A:-0.1:A=-0.1,B=-2 B:-0.5:B=-0.5,C=-0.9 C:-1:C=-1,D=-3 D:-2:D=-2,A=-4" # 4 shared tokens
answer "$T/a.json" $P "E:-0.5:E=-0.5,F=-0.51" "F:-1:F=-1,A=-2"
answer "$T/b.json" $P "E:-0.5002:E=-0.5002,F=-0.5101" "F:-1:F=-1,A=-2"
judge 0 "same 6 tokens" "same tokens"
answer "$T/b.json" $P "F:-0.505:F=-0.505,E=-0.506" "A:-1:A=-1,F=-2"
judge 0 "near-tie after 4 equal tokens" "a logit near-tie"
answer "$T/b.json" $P "E:-0.64:E=-0.64,F=-0.8" "F:-1:F=-1,A=-2"
judge 3 "knife-edge: token 4 ('E') 0.14 nats apart, then the same tokens to the end" "a later onset"
answer "$T/b.json" $P "F:-0.2:F=-0.2,E=-0.9" "A:-1:A=-1,F=-2"
judge 3 "knife-edge: parting after 4 equal tokens" "a later parting that is no near-tie"
answer "$T/b.json" "A:-0.1:A=-0.1,B=-2" "C:-0.5:C=-0.5,B=-0.51"
judge 1 "part within the first 4 tokens" "an early parting"
answer "$T/b.json" "A:-0.3:A=-0.3,B=-2" "B:-0.5:B=-0.5,C=-0.9" "C:-1:C=-1,D=-3" "D:-2:D=-2,A=-4" "E:-0.5:E=-0.5,F=-0.51" "F:-1:F=-1,A=-2"
judge 1 "token 0 ('A') 0.2 nats apart" "differences from the first token"
echo PASS
