#!/usr/bin/env bash
# Checks llmr-hub against the real huggingface_hub Python client (run where it is installed, e.g.
# the GPU machine; no internet needed: everything talks to 127.0.0.1).
#
#   tests/gpu/hub/check_hf_hub.sh [BUILD_DIR]        (default: build; needs BUILD_DIR/bin/llmr-hub)
#
# It generates a snapshot folder (small JSON/text files, a nested file whose name has a space and a
# '#', an empty file, a 1-byte .bin, a 12 MiB .safetensors and an 11 MiB plain file), serves it with
# llmr-hub, and with huggingface_hub:
#   1. snapshot_download(repo_id, endpoint=..., revision="main") into a fresh cache;
#   2. snapshot_download(..., revision=<commit sha from model_info>) into another cache;
#   3. snapshot_download(..., local_dir=...);
#   4. hf_hub_download of one file through a hub that drops the connection midway (--fault drop),
#      which huggingface_hub must resume with a Range request;
#   5. model_info / list_repo_tree fields (sha, siblings, LFS sha256 and sizes) and the errors
#      for an unknown repo, revision and file (RepositoryNotFoundError, RevisionNotFoundError,
#      EntryNotFoundError);
# then compares every downloaded file with the original using cmp. Prints one PASS/FAIL line per
# step and a final "PASS" or "FAIL"; exit 0 on PASS, 1 on FAIL, 77 when huggingface_hub is missing.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
BUILD="${1:-$REPO/build}"
export LLMR_BUILD="$(cd "$BUILD" 2>/dev/null && pwd || echo "$BUILD")"
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import huggingface_hub' >/dev/null 2>&1; then
  echo "SKIP: python huggingface_hub is not installed here"; exit 77
fi
[ -x "$LLMR_BUILD/bin/llmr-hub" ] || { echo "FAIL: $LLMR_BUILD/bin/llmr-hub not built"; exit 1; }
. "$REPO/e2e/lib/hub.sh"

WORK="$(mktemp -d /tmp/llmr-hfcheck.XXXXXX)"
PID2=""
cleanup() { hub_stop; [ -n "$PID2" ] && kill "$PID2" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
ROOT="$WORK/root"
hub_make_fixture "$ROOT"
hub_start "$ROOT" --cache "$WORK/hubcache" --page-size 3 || { echo FAIL; exit 1; }

# A second hub on the same folder that drops model.safetensors midway, once.
"$LLMR_BUILD/bin/llmr-hub" --root "$ROOT" --cache "$WORK/hubcache" --listen 127.0.0.1:0 --port-file "$WORK/port2" \
  --fault 'drop:org/tiny/model.safetensors@1' > "$WORK/hub2.log" 2>&1 &
PID2=$!
for _ in $(seq 1 200); do [ -s "$WORK/port2" ] && break; sleep 0.05; done
URL2="http://127.0.0.1:$(cat "$WORK/port2")"

export HF_HOME="$WORK/hf_home" HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_ETAG_TIMEOUT=60 HF_HUB_DOWNLOAD_TIMEOUT=60
unset HF_HUB_OFFLINE HF_TOKEN HF_ENDPOINT
fails=0
"$PY" - "$HUB_URL" "$URL2" "$WORK" > "$WORK/py.out" 2>&1 <<'PYEOF'
import os, sys, traceback
import huggingface_hub as hh
from huggingface_hub import HfApi, snapshot_download, hf_hub_download
ep, ep2, work = sys.argv[1], sys.argv[2], sys.argv[3]
print("huggingface_hub", hh.__version__)
def step(name, fn):
    try:
        r = fn()
        print("STEP-OK", name, r if r is not None else "")
    except Exception:
        print("STEP-FAIL", name)
        traceback.print_exc()
api = HfApi(endpoint=ep, token=False)
info = {}
def s_info():
    m = api.model_info("org/tiny")
    assert m.id == "org/tiny", m.id
    assert m.sha and len(m.sha) == 40, m.sha
    names = sorted(s.rfilename for s in m.siblings)
    info["sha"] = m.sha
    return f"sha={m.sha} siblings={len(names)}"
def s_tree():
    files = [f for f in api.list_repo_tree("org/tiny", recursive=True) if f.__class__.__name__ == "RepoFile"]
    lfs = {f.path: (f.lfs.sha256, f.lfs.size) for f in files if f.lfs is not None}
    assert "model.safetensors" in lfs and "big.dat" in lfs and "one.bin" in lfs, lfs
    assert "config.json" not in lfs
    with open(os.path.join(work, "tree.txt"), "w") as fh:
        for f in files:
            fh.write(f"{f.path}\t{f.size}\t{f.lfs.sha256 if f.lfs else '-'}\n")
    return f"{len(files)} files, {len(lfs)} LFS"
def s_main():
    p = snapshot_download("org/tiny", endpoint=ep, revision="main", cache_dir=os.path.join(work, "c1"), token=False)
    open(os.path.join(work, "snap_main"), "w").write(p)
    return p
def s_sha():
    p = snapshot_download("org/tiny", endpoint=ep, revision=info["sha"], cache_dir=os.path.join(work, "c2"), token=False)
    open(os.path.join(work, "snap_sha"), "w").write(p)
    return p
def s_local():
    p = snapshot_download("org/tiny", endpoint=ep, local_dir=os.path.join(work, "local"), token=False)
    return p
def s_resume():
    p = hf_hub_download("org/tiny", "model.safetensors", endpoint=ep2, cache_dir=os.path.join(work, "c3"), token=False)
    open(os.path.join(work, "resumed"), "w").write(p)
    return p
def expect(exc_names, fn):
    try:
        fn()
    except Exception as e:
        names = [c.__name__ for c in type(e).__mro__]
        assert any(n in names for n in exc_names), f"got {type(e).__name__}: {e}"
        return type(e).__name__
    raise AssertionError("no error raised")
step("model_info", s_info)
step("list_repo_tree", s_tree)
step("snapshot_download(revision=main)", s_main)
step("snapshot_download(revision=sha)", s_sha)
step("snapshot_download(local_dir)", s_local)
step("hf_hub_download resumes after a dropped connection", s_resume)
step("unknown repo -> RepositoryNotFoundError",
     lambda: expect(["RepositoryNotFoundError"], lambda: api.model_info("org/nope")))
step("unknown revision -> RevisionNotFoundError",
     lambda: expect(["RevisionNotFoundError"], lambda: api.model_info("org/tiny", revision="v9")))
step("unknown file -> EntryNotFoundError",
     lambda: expect(["EntryNotFoundError", "RemoteEntryNotFoundError"],
                    lambda: hf_hub_download("org/tiny", "nothere.json", endpoint=ep, cache_dir=os.path.join(work, "c4"), token=False)))
PYEOF
cat "$WORK/py.out"
while read -r line; do
  case "$line" in
    STEP-OK*)   echo "PASS ${line#STEP-OK }" ;;
    STEP-FAIL*) echo "FAIL ${line#STEP-FAIL }"; fails=$((fails+1)) ;;
  esac
done < "$WORK/py.out"
grep -q '^STEP-' "$WORK/py.out" || { echo "FAIL python did not run the steps"; fails=$((fails+1)); }

# byte-for-byte comparison of every downloaded tree with the original
compare_tree() {
  local name="$1" dir="$2" bad=0 n=0
  if [ -z "$dir" ] || [ ! -d "$dir" ]; then echo "FAIL $name: no snapshot folder"; fails=$((fails+1)); return; fi
  while IFS= read -r -d '' f; do
    rel="${f#"$ROOT/org/tiny/"}"
    n=$((n+1))
    if ! cmp -s "$f" "$dir/$rel"; then echo "  differs or missing: $rel"; bad=1; fi
  done < <(find "$ROOT/org/tiny" -type f ! -name .commit -print0)
  extra=$(cd "$dir" && find -L . -type f ! -path './.cache/*' | wc -l)
  if [ $bad -eq 0 ] && [ "$extra" -eq "$n" ]; then echo "PASS cmp $name: $n files byte-identical"
  else echo "FAIL cmp $name ($n expected, $extra found)"; fails=$((fails+1)); fi
}
compare_tree "snapshot(main)" "$(cat "$WORK/snap_main" 2>/dev/null)"
compare_tree "snapshot(sha)" "$(cat "$WORK/snap_sha" 2>/dev/null)"
compare_tree "local_dir" "$WORK/local"
if [ -s "$WORK/resumed" ] && cmp -s "$ROOT/org/tiny/model.safetensors" "$(cat "$WORK/resumed")"; then
  echo "PASS cmp resumed model.safetensors"
else
  echo "FAIL cmp resumed model.safetensors"; fails=$((fails+1))
fi
if grep -q 'fault: dropping' "$WORK/hub2.log"; then echo "PASS the second hub did drop the first transfer"
else echo "FAIL the drop fault never fired (see hub2.log)"; fails=$((fails+1)); fi

echo "llmr-hub log (first hub):"; sed 's/^/  /' "$HUB_LOG" | tail -20
if [ $fails -eq 0 ]; then echo PASS; exit 0; fi
echo "FAIL ($fails)"; exit 1
