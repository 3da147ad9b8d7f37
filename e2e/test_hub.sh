#!/usr/bin/env bash
# e2e: llmr-hub serves a generated snapshot; llmr's hub client (llmr-hubget) lists it across pages
# and downloads it byte-identically, resuming after a dropped connection and from a left-over
# .partial; a corrupted file is caught by its sha256; curl checks the hub's HTTP contract (HEAD
# headers, Range/206/416, ETag/304, 404 JSON with X-Error-Code, 400 on traversal, commit pinning,
# hash-cache invalidation when a file changes).
set -uo pipefail
cd "$(dirname "$0")/.."
. e2e/lib/hub.sh
BIN="${LLMR_BUILD:-$(pwd)/build}/bin"
command -v curl >/dev/null || { echo "SKIP: curl not installed"; exit 77; }
[ -x "$BIN/llmr-hub" ] && [ -x "$BIN/llmr-hubget" ] || { echo "FAIL: build llmr-hub and llmr-hubget first"; exit 1; }

WORK="$(mktemp -d /tmp/llmr-e2e-hub.XXXXXX)"
cleanup() { hub_stop; rm -rf "$WORK"; }
trap cleanup EXIT
fails=0
ok()   { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails+1)); }
check() { local what="$1"; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }

ROOT="$WORK/root"
hub_make_fixture "$ROOT"
mkdir -p "$ROOT/org/bad"; cp "$ROOT/org/tiny/model.safetensors" "$ROOT/org/bad/model.safetensors"
printf 'secret\n' > "$ROOT/org/tiny/hidden.txt"
hub_start "$ROOT" --cache "$WORK/cache" --page-size 3 \
  --fault 'drop:org/tiny/model.safetensors@1' --fault 'corrupt:org/bad/*;hide:org/tiny/hidden.txt' || exit 1
T="$ROOT/org/tiny"

# --- our client: listing across pages (page size 3), LFS sha256s ---
"$BIN/llmr-hubget" --endpoint "$HUB_URL" --repo org/tiny --list > "$WORK/list.txt" 2>&1
check "list succeeds" grep -q '^# org/tiny@main commit [0-9a-f]\{40\}, 7 files' "$WORK/list.txt"
check "hidden file is not listed" bash -c "! grep -q hidden.txt '$WORK/list.txt'"
check "list has the nested file" grep -q $'^sub dir/notes #1.txt\t25\t-$' "$WORK/list.txt"
sha_model=$(sha256sum "$T/model.safetensors" | cut -c1-64)
check "safetensors is LFS with its sha256" grep -q $'^model.safetensors\t'"$(stat -c %s "$T/model.safetensors")"$'\t'"$sha_model" "$WORK/list.txt"
check "a >=10 MiB file is LFS" grep -q $'^big.dat\t11534336\t'"$(sha256sum "$T/big.dat" | cut -c1-64)" "$WORK/list.txt"
check "a 1-byte .bin is LFS" grep -q $'^one.bin\t1\t'"$(printf x | sha256sum | cut -c1-64)" "$WORK/list.txt"
check "a small json is not LFS" grep -q $'^config.json\t[0-9]*\t-$' "$WORK/list.txt"

# --- our client: full download (model.safetensors drops once midway -> Range resume) ---
"$BIN/llmr-hubget" --endpoint "$HUB_URL" --repo org/tiny --out "$WORK/dl" > "$WORK/dl.txt" 2>&1 || { cat "$WORK/dl.txt"; fail "download"; }
for f in config.json tokenizer_config.json "sub dir/notes #1.txt" one.bin empty.txt model.safetensors big.dat; do
  check "byte-identical: $f" cmp -s "$T/$f" "$WORK/dl/$f"
done
check "the dropped download resumed (2 attempts, no restart)" grep -q '^model.safetensors: .* attempts 2, resumed from 0, restarts 0' "$WORK/dl.txt"
check "the hub dropped the connection once" grep -q 'fault: dropping org/tiny/model.safetensors' "$HUB_LOG"
check "no .partial left" bash -c "! ls '$WORK/dl'/*.partial 2>/dev/null | grep -q ."

# --- resume from a left-over .partial ---
mkdir -p "$WORK/dl2"
head -c 5000000 "$T/big.dat" > "$WORK/dl2/big.dat.partial"
"$BIN/llmr-hubget" --endpoint "$HUB_URL" --repo org/tiny --include big.dat --out "$WORK/dl2" > "$WORK/dl2.txt" 2>&1
check "resumed from the partial" grep -q '^big.dat: 11534336 bytes, .* resumed from 5000000, restarts 0' "$WORK/dl2.txt"
check "resumed file byte-identical" cmp -s "$T/big.dat" "$WORK/dl2/big.dat"
"$BIN/llmr-hubget" --endpoint "$HUB_URL" --repo org/tiny --include big.dat --out "$WORK/dl2" > "$WORK/dl3.txt" 2>&1
check "a complete file is skipped" grep -q '^big.dat: already complete' "$WORK/dl3.txt"

# --- a corrupted transfer is caught by the LFS sha256 ---
"$BIN/llmr-hubget" --endpoint "$HUB_URL" --repo org/bad --out "$WORK/bad" > "$WORK/bad.txt" 2>&1
rc=$?
check "corrupted download fails" test $rc -eq 1
check "corruption reported as a sha256 mismatch" grep -q 'failed verification.*sha256' "$WORK/bad.txt"
check "corrupted bytes not kept" test ! -e "$WORK/bad/model.safetensors" -a ! -e "$WORK/bad/model.safetensors.partial"

# --- client errors name the cause ---
"$BIN/llmr-hubget" --endpoint "$HUB_URL" --repo org/nope --list > "$WORK/e1.txt" 2>&1
check "unknown repo: repository not found" grep -q 'repository not found' "$WORK/e1.txt"
"$BIN/llmr-hubget" --endpoint "$HUB_URL" --repo org/tiny --revision v9 --list > "$WORK/e2.txt" 2>&1
check "unknown revision: revision not found" grep -q 'revision not found' "$WORK/e2.txt"
"$BIN/llmr-hubget" --endpoint "http://127.0.0.1:1" --retries 0 --repo org/tiny --list > "$WORK/e3.txt" 2>&1
check "hub down: unreachable, names the hub" grep -q 'hub http://127.0.0.1:1 unreachable.*connection refused' "$WORK/e3.txt"

# --- the HTTP contract, with curl ---
U="$HUB_URL/org/tiny/resolve/main"
commit=$(curl -s "$HUB_URL/api/models/org/tiny/revision/main" | sed -n 's/.*"sha":"\([0-9a-f]*\)".*/\1/p')
check "revision answers a 40-hex sha" test ${#commit} -eq 40
curl -sI "$U/model.safetensors" | tr -d '\r' > "$WORK/head.txt"
check "HEAD 200" grep -q '^HTTP/1.1 200' "$WORK/head.txt"
check "HEAD X-Repo-Commit" grep -qi "^X-Repo-Commit: $commit" "$WORK/head.txt"
check "HEAD X-Linked-Etag is the sha256" grep -qi "^X-Linked-Etag: \"$sha_model\"" "$WORK/head.txt"
check "HEAD X-Linked-Size" grep -qi "^X-Linked-Size: $(stat -c %s "$T/model.safetensors")" "$WORK/head.txt"
check "HEAD Content-Length" grep -qi "^Content-Length: $(stat -c %s "$T/model.safetensors")" "$WORK/head.txt"
oid=$(git hash-object "$T/config.json" 2>/dev/null || true)
if [ -n "$oid" ]; then
  check "small file ETag is its git blob sha1" bash -c "curl -sI '$U/config.json' | tr -d '\r' | grep -qi '^ETag: \"$oid\"'"
fi
curl -s -r 1000-1999 -o "$WORK/range.bin" -w '%{http_code}' "$U/model.safetensors" > "$WORK/code.txt"
check "Range -> 206" grep -q 206 "$WORK/code.txt"
check "Range bytes identical" cmp -s "$WORK/range.bin" <(tail -c +1001 "$T/model.safetensors" | head -c 1000)
check "suffix Range" bash -c "curl -s -H 'Range: bytes=-10' '$U/config.json' | cmp -s - <(tail -c 10 '$T/config.json')"
check "Range past EOF -> 416" test "$(curl -s -o /dev/null -w '%{http_code}' -r 999999999- "$U/config.json")" = 416
check "If-None-Match -> 304" test "$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: \"$sha_model\"" "$U/model.safetensors")" = 304
check "resolve by commit sha" cmp -s "$T/config.json" <(curl -sf "$HUB_URL/org/tiny/resolve/$commit/config.json")
check "empty file" test "$(curl -s -o /dev/null -w '%{http_code}:%{size_download}' "$U/empty.txt")" = "200:0"
check "path with space and #" cmp -s "$T/sub dir/notes #1.txt" <(curl -sf "$U/sub%20dir/notes%20%231.txt")
code=$(curl -s -o "$WORK/404.json" -D "$WORK/404.h" -w '%{http_code}' "$HUB_URL/org/nope/resolve/main/config.json")
check "unknown repo -> 404 JSON RepoNotFound" bash -c "[ $code = 404 ] && grep -q '\"error\"' '$WORK/404.json' && grep -qi 'X-Error-Code: RepoNotFound' '$WORK/404.h'"
code=$(curl -s -o "$WORK/404.json" -D "$WORK/404.h" -w '%{http_code}' "$U/nothere.json")
check "unknown file -> 404 EntryNotFound" bash -c "[ $code = 404 ] && grep -qi 'X-Error-Code: EntryNotFound' '$WORK/404.h'"
code=$(curl -s -o /dev/null -D "$WORK/404.h" -w '%{http_code}' "$HUB_URL/org/tiny/resolve/0000000000000000000000000000000000000000/config.json")
check "unknown revision -> 404 RevisionNotFound" bash -c "[ $code = 404 ] && grep -qi 'X-Error-Code: RevisionNotFound' '$WORK/404.h'"
# HEAD then GET on one keep-alive connection: a HEAD reply must carry no body, or the GET's reply
# would be read from the middle of it (checked for an API answer, a file, and an error)
head_then_get() {
  exec 3<>"/dev/tcp/127.0.0.1/$HUB_PORT" || return 1
  printf 'HEAD %s HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' "$1" >&3
  timeout 5 cat <&3 > "$WORK/pipelined.txt"; exec 3<&-
  [ "$(grep -c '^HTTP/1.1 ' "$WORK/pipelined.txt")" = 2 ] && \
    [ "$(sed -n '2,$p' "$WORK/pipelined.txt" | grep -m1 -n '^HTTP/1.1 200' | cut -d: -f1)" -gt 0 ] && \
    ! tr -d '\r' < "$WORK/pipelined.txt" | awk 'BEGIN{h=1} /^$/{if(h==1){getline; print; exit}}' | grep -q '^{'
}
check "HEAD on model info: no body" head_then_get /api/models/org/tiny
check "HEAD on a file: no body" head_then_get /org/tiny/resolve/main/config.json
check "HEAD on a 404: no body" head_then_get /org/tiny/resolve/main/nothere.json
check "HEAD 404 has no body" test "$(curl -s -I -o /dev/null -w '%{http_code}:%{size_download}' "$U/nothere.json")" = "404:0"
check "traversal ../ -> 400" test "$(curl -s --path-as-is -o /dev/null -w '%{http_code}' "$U/../../../../etc/passwd")" = 400
check "traversal %2e%2e -> 400" test "$(curl -s -o /dev/null -w '%{http_code}' "$U/%2e%2e/%2e%2e/secret")" = 400
check "backslash -> 400" test "$(curl -s -o /dev/null -w '%{http_code}' "$U/a%5Cb")" = 400
check "empty segment -> 400" test "$(curl -s -o /dev/null -w '%{http_code}' "$U/sub%20dir//x")" = 400
check "bad repo id -> 400" test "$(curl -s --path-as-is -o /dev/null -w '%{http_code}' "$HUB_URL/api/models/org/../tree/main")" = 400
check "tree paginates with Link rel=next" bash -c "curl -sD - -o /dev/null '$HUB_URL/api/models/org/tiny/tree/main?recursive=true' | grep -qi '^Link: <http://127.0.0.1:$HUB_PORT/api/models/org/tiny/tree/main?recursive=true&cursor=3>; rel=\"next\"'"
# every page of a listing, following the Link headers the way huggingface_hub does
all_pages() {
  local url="$1" n=0
  while [ -n "$url" ] && [ $n -lt 50 ]; do
    curl -s -D "$WORK/pg.h" "$url"; echo
    url=$(tr -d '\r' < "$WORK/pg.h" | sed -n 's/^[Ll]ink: <\([^>]*\)>; rel="next".*/\1/p'); n=$((n+1))
  done
}
all_pages "$HUB_URL/api/models/org/tiny/tree/main" > "$WORK/tree_all.txt"
check "non-recursive listing spans 3 pages, no nested file" bash -c "[ \$(grep -c . '$WORK/tree_all.txt') = 3 ] && ! grep -q notes '$WORK/tree_all.txt' && grep -q '\"type\":\"directory\",\"oid\":\"[0-9a-f]\{40\}\",\"size\":0,\"path\":\"sub dir\"' '$WORK/tree_all.txt'"
check "tree entry shape" bash -c "cat '$WORK/tree_all.txt' | grep -q '{\"type\":\"file\",\"oid\":\"[0-9a-f]\{40\}\",\"size\":1,\"path\":\"one.bin\",\"lfs\":{\"oid\":\"[0-9a-f]\{64\}\",\"size\":1,\"pointerSize\":[0-9]*}}'"
check "model info siblings" bash -c "curl -s '$HUB_URL/api/models/org/tiny/revision/main' | grep -q '\"siblings\":\[{\"rfilename\":\"big.dat\"}'"
check ".commit pins the sha" bash -c "curl -s '$HUB_URL/api/models/org/pinned/revision/main' | grep -q '\"sha\":\"0123456789abcdef0123456789abcdef01234567\"'"
check "commit sha accepted as revision" test "$(curl -s -o /dev/null -w '%{http_code}' "$HUB_URL/org/pinned/resolve/0123456789abcdef0123456789abcdef01234567/config.json")" = 200
check "hash cache lives outside the root" bash -c "ls '$WORK/cache' | grep -q . && ! grep -rq llmr-hub-cache '$ROOT'"

# --- hostile request paths: random percent-encoded bytes under every route; the hub must survive ---
for i in $(seq 1 12); do
  junk=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' | sed 's/../%&/g')
  for pre in "" "org/" "org/tiny/resolve/main/" "org/tiny/resolve/$junk/" "api/models/" "api/models/org/tiny/tree/main/" "api/models/org/tiny/revision/"; do
    curl -s -o /dev/null --max-time 5 "$HUB_URL/$pre$junk" || true
  done
done
check "hub survives hostile paths" test "$(curl -s -o /dev/null -w '%{http_code}' "$U/config.json")" = 200
check "hub process still alive" kill -0 "$HUB_PID"

# --- a changed file: new sha256 in the listing, new commit sha ---
printf 'y' > "$T/one.bin"; touch -d '2001-01-01' "$T/one.bin"
commit2=$(curl -s "$HUB_URL/api/models/org/tiny/revision/main" | sed -n 's/.*"sha":"\([0-9a-f]*\)".*/\1/p')
check "commit changes when a file changes" test "$commit2" != "$commit" -a ${#commit2} -eq 40
check "listing shows the new sha256" bash -c "'$BIN/llmr-hubget' --endpoint '$HUB_URL' --repo org/tiny --list | grep -q '$(printf y | sha256sum | cut -c1-64)'"
check "old commit no longer resolves" test "$(curl -s -o /dev/null -w '%{http_code}' "$HUB_URL/org/tiny/resolve/$commit/one.bin")" = 404

# --- a multi-GB file: a 5 GiB sparse file whose hashes are seeded in the sidecar cache, so the test
# also shows the cache is read (hashing 5 GiB would take the test's whole budget) ---
H="$ROOT/org/huge"; mkdir -p "$H"
truncate -s 5G "$H/model.gguf"
printf 'TAIL-OF-5GiB' | dd of="$H/model.gguf" bs=1 seek=$((5*1024*1024*1024 - 12)) conv=notrunc status=none
abs="$(cd "$H" && pwd -P)/model.gguf"
read -r hsize hmt hino < <(stat -c '%s %.9Y %i' "$abs")
fake_sha=5555555555555555555555555555555555555555555555555555555555555555
printf 'llmr-hub-cache v1\n%s %s %s %s %s\n' "$hsize" "${hmt/./}" "$hino" "$fake_sha" 1111111111111111111111111111111111111111 \
  > "$WORK/cache/$(printf '%s' "$abs" | sha256sum | cut -c1-64)"
curl -sI "$HUB_URL/org/huge/resolve/main/model.gguf" | tr -d '\r' > "$WORK/huge.h"
check "5 GiB file: HEAD size" grep -qi '^X-Linked-Size: 5368709120' "$WORK/huge.h"
check "5 GiB file: sha256 from the sidecar cache" grep -qi "^X-Linked-Etag: \"$fake_sha\"" "$WORK/huge.h"
check "5 GiB file: Range at the end" test "$(curl -s -r 5368709100- "$HUB_URL/org/huge/resolve/main/model.gguf" | tail -c 12)" = "TAIL-OF-5GiB"
check "5 GiB file: 206 Content-Range" bash -c "curl -s -r 5368709100- -D - -o /dev/null '$HUB_URL/org/huge/resolve/main/model.gguf' | tr -d '\r' | grep -q '^Content-Range: bytes 5368709100-5368709119/5368709120'"
check "5 GiB file: Range across the 4 GiB mark" test "$(curl -s -r 4294967290-4294967305 "$HUB_URL/org/huge/resolve/main/model.gguf" | wc -c)" = 16

# --- graceful stop on SIGTERM ---
kill -TERM "$HUB_PID"; sleep 0.3
check "llmr-hub stops on SIGTERM" bash -c "! kill -0 $HUB_PID 2>/dev/null"
check "llmr-hub logged its stop" grep -q 'stopped' "$HUB_LOG"
wait "$HUB_PID" 2>/dev/null; HUB_PID=""
check "no sanitizer report in the hub log (meaningful in sanitizer builds)" bash -c "! grep -qE 'Sanitizer|runtime error' '$HUB_LOG'"

check "--help works" bash -c "'$BIN/llmr-hub' --help | grep -q -- '--root'"
check "cache inside root is refused" bash -c "! '$BIN/llmr-hub' --root '$ROOT' --cache '$ROOT/org/c' --listen 127.0.0.1:0 >/dev/null 2>&1"
check "bad fault spec is refused" bash -c "! '$BIN/llmr-hub' --root '$ROOT' --fault 'explode:*' --listen 127.0.0.1:0 >/dev/null 2>&1"
rm -rf "$ROOT/org/c"

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
