#!/usr/bin/env bash
# e2e: kill -9 the router during a burst of registrations, restart, and check the kill -9 guarantee
# (docs/router.md): every model answered 201 is present and intact (its record equals the 201
# body byte for byte, after key sorting), nothing is half-written (every present record is
# complete, the database passes integrity_check), and the router keeps working on the same data.
# Three rounds of burst + kill -9 on the same data directory.
set -uo pipefail
cd "$(dirname "$0")/.."
. e2e/lib/hub.sh
. e2e/lib/router.sh
BIN="${LLMR_BUILD:-$(pwd)/build}/bin"
for t in curl jq sqlite3 xargs; do command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }; done
[ -x "$BIN/llmr-hub" ] && [ -x "$BIN/llmr-router" ] || { echo "FAIL: build llmr-hub and llmr-router first"; exit 1; }

WORK="$(mktemp -d /tmp/llmr-e2e-crash.XXXXXX)"
ROUTER_LOG_FILE="$WORK/router.log"
cleanup() { router_kill9; hub_stop; rm -rf "$WORK"; }
trap cleanup EXIT
fails=0
ok()   { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails+1)); }

N=60; ROUNDS=3; PER=$((N / ROUNDS))
ROOT="$WORK/hub"
router_make_repo "$ROOT" burst/m001 single
for i in $(seq -f %03g 2 $N); do cp -r "$ROOT/burst/m001" "$ROOT/burst/m$i"; done
hub_start "$ROOT" --cache "$WORK/hubcache" || exit 1
ADMIN=admin-key-crash-0123456789
mkdir -p "$WORK/r"

# One registration; writes r/ID.code and r/ID.body.
cat > "$WORK/one.sh" <<SH
#!/usr/bin/env bash
i=\$1
code=\$(curl -s -o "$WORK/r/\$i.body" -w '%{http_code}' --max-time 20 -X POST -H "Authorization: Bearer $ADMIN" \
  -d "{\"repo\":\"burst/m\$i\",\"display_name\":\"burst model \$i\"}" "\$2/v0/models/register")
echo "\$code" > "$WORK/r/\$i.code"
SH
chmod +x "$WORK/one.sh"

for round in $(seq 1 $ROUNDS); do
  router_start "$WORK/data" --admin-key "$ADMIN" --hub-endpoint "$HUB_URL" --max-registrations 16 || exit 1
  first=$(( (round - 1) * PER + 1 )); last=$(( round * PER ))
  seq -f %03g $first $last \
    | xargs -P 6 -I{} "$WORK/one.sh" {} "$ROUTER_URL" &
  burst=$!
  # kill -9 once a few registrations of this round were answered 201: the rest are in flight or queued
  base=$(cat "$WORK"/r/*.code 2>/dev/null | grep -c '^201$')
  want=$(( base + 2 + round * 2 ))
  for t in $(seq 1 400); do
    n=$(cat "$WORK"/r/*.code 2>/dev/null | grep -c '^201$')
    [ "$n" -ge $want ] && break
    sleep 0.01
  done
  router_kill9
  wait $burst
  echo "round $round: kill -9 after $(( $(cat "$WORK"/r/*.code 2>/dev/null | grep -c '^201$') - base )) answered 201 in this round"
done

answered=$(grep -l '^201$' "$WORK"/r/*.code | wc -l)
unanswered=$(grep -L '^201$' "$WORK"/r/*.code | wc -l)
echo "registrations answered 201: $answered; not answered 201 (killed in flight, refused, or never sent): $unanswered"
[ "$answered" -ge 3 ] && ok "the burst got 201 answers before the kills" || fail "too few 201 answers ($answered)"

check_db=$(sqlite3 "$WORK/data/router.db" 'PRAGMA integrity_check;' 2>&1)
# (sqlite3 opening the WAL database replays a committed tail exactly as the router will)
[ "$check_db" = ok ] && ok "database integrity_check after kill -9" || fail "integrity_check: $check_db"

router_start "$WORK/data" --admin-key "$ADMIN" --hub-endpoint "$HUB_URL" || exit 1
lost=0; changed=0; partial=0; present_unanswered=0
for codef in "$WORK"/r/*.code; do
  i=$(basename "$codef" .code); id="burst/m$i"
  got=$(curl -s -H "Authorization: Bearer $ADMIN" "$ROUTER_URL/v0/models/$id")
  st=$(echo "$got" | jq -r 'if .error then .error.code else "present" end')
  if [ "$(cat "$codef")" = 201 ]; then
    if [ "$st" != present ]; then lost=$((lost+1)); echo "  lost: $id ($st)"
    elif [ "$(echo "$got" | jq -cS 'del(.nodes,.ready)')" != "$(jq -cS . "$WORK/r/$i.body")" ]; then
      changed=$((changed+1)); echo "  changed: $id"; fi
  elif [ "$st" = present ]; then
    present_unanswered=$((present_unanswered+1))
    # committed just before the kill: it must be whole
    echo "$got" | jq -e --arg id "$id" '.id==$id and (.commit|length)==40 and (.files|length)==4 and .created_at>0' >/dev/null \
      || { partial=$((partial+1)); echo "  incomplete: $id"; }
  elif [ "$st" != model_not_found ]; then
    partial=$((partial+1)); echo "  $id: unexpected $st"
  fi
done
[ $lost -eq 0 ] && ok "every 201'd model is present after restart ($answered)" || fail "$lost 201'd model(s) lost"
[ $changed -eq 0 ] && ok "every 201'd record is byte-identical to its 201 body" || fail "$changed record(s) changed"
[ $partial -eq 0 ] && ok "no half-written record ($present_unanswered committed without an answer, all whole)" || fail "$partial record(s) incomplete"
rows=$(sqlite3 "$WORK/data/router.db" 'SELECT count(*) FROM models;')
listed=$(curl -s -H "Authorization: Bearer $ADMIN" "$ROUTER_URL/v0/models" | jq '.data|length')
[ "$rows" = "$listed" ] && [ "$listed" -eq $((answered + present_unanswered)) ] && ok "GET /v0/models lists exactly the committed models ($listed)" \
  || fail "rows $rows, listed $listed, expected $((answered + present_unanswered))"
# the router goes on working on the recovered data
# decide what to expect before asking: 409 if m001 is committed (answered or not), else 201
want=409; [ "$(cat "$WORK/r/001.code" 2>/dev/null)" = 201 ] || want=$( [ "$(curl -s -H "Authorization: Bearer $ADMIN" "$ROUTER_URL/v0/models/burst/m001" | jq -r .id)" = burst/m001 ] && echo 409 || echo 201)
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $ADMIN" -d '{"repo":"burst/m001"}' "$ROUTER_URL/v0/models/register")
[ "$code" = "$want" ] && ok "registering after recovery answers as expected ($code)" || fail "after recovery: $code, want $want"
router_stop

if [ $fails -ne 0 ]; then echo "$fails check(s) failed"; tail -20 "$WORK/router.log"; exit 1; fi
echo "kill -9 guarantee holds"
