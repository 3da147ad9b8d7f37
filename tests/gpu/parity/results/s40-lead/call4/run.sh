#!/bin/bash
# session 40 call 4: LLMR_GPTOSS_BATCH_QKV_ROWS default 8 -> 4 (call 3: 8 streams +11.6% step rate). A/B of the small
# steps' o_proj threshold beside it (o_proj on the tensor-core GEMM from its split at 5-7 rows: TC_MIN=5; and 4 rows too:
# QKV_ROWS=3 O_ROWS=3 TC_MIN=4), the old default; then the gate (selftest parity batching serving, --full; no kernel
# changed) and, beside it, selftest parity batching without the expert cache.
O=$OUT; rm -rf /tmp/B; mkdir -p /tmp/B /tmp/cache
xz -dc .gpu-lead/pkg/build.tar.xz | tar -C /tmp/B -xf - && tar xzf .gpu-lead/pkg/tok.tgz -C /tmp/cache
export LLMR_CACHE=/tmp/cache; B=/tmp/B/build; SECONDS=0
[ -f /tmp/m20b/config.json ] || $B/bin/llmr-mkmodel --preset 20b --seed 1 --out /tmp/m20b > /tmp/mk.log 2>&1; echo "mkmodel rc=$? ${SECONDS}s"
run() { # name env...
  local name=$1; shift
  env LLMR_GPTOSS_BATCH_PROFILE=1 "$@" timeout 60 $B/bench/throughput --model /tmp/m20b --streams 8,32,64 > /tmp/tp.txt 2>&1
  local rc=$?
  { echo "== $name ($*)"; cat /tmp/tp.txt; } >> $O/ab.txt
  echo "$name rc=$rc ${SECONDS}s: $(grep -E '^ +(8|32|64) +[0-9]+ +[0-9]+ ' /tmp/tp.txt | awk '{printf "%s %s step %s (%s) ", $1, $5, $8, $NF}')"
  awk '/^8 streams/{f=1} /^32 streams/{f=0} f && /^ +(2-3|4-7|8-15) /{printf "   8s %s: %s | %s\n", $1, $4, substr($0, 60)}' /tmp/tp.txt
}
for v in new tc5 q3 q3 tc5 new; do
  case $v in
    new) run new;;
    tc5) run tc5 LLMR_GPTOSS_BATCH_TC_MIN=5;;
    q3) run q3 LLMR_GPTOSS_BATCH_QKV_ROWS=3 LLMR_GPTOSS_BATCH_O_ROWS=3 LLMR_GPTOSS_BATCH_TC_MIN=4;;
    old) run old LLMR_GPTOSS_BATCH_QKV_ROWS=8;;
  esac
done
LLMR_GPTOSS_EXPERT_CACHE=0 timeout $((585 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g0 --steps "selftest parity batching" > $O/gate-nocache.txt 2>&1 &
G0=$!
timeout $((590 - SECONDS)) tests/gpu/gate.sh --build $B --out /tmp/g --full --steps "selftest parity batching serving" > $O/gate.txt 2>&1
echo "gate rc=$? ${SECONDS}s"; grep "^GATE" $O/gate.txt
wait $G0; echo "gate without the cache rc=$? ${SECONDS}s"; grep "^GATE" $O/gate-nocache.txt
grep -h "FAIL" /tmp/g/gate/*.txt /tmp/g0/gate/*.txt 2>/dev/null | grep -v "FAIL otherwise" | head -8 | cut -c1-200
mkdir -p $O/g $O/g0; cp /tmp/g/gate/*.txt $O/g/ 2>/dev/null; cp /tmp/g0/gate/*.txt $O/g0/ 2>/dev/null
echo "total ${SECONDS}s"
