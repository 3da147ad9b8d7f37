#!/usr/bin/env bash
# Runs llmr's tests and prints one closing line: "Summary: N passed, N failed, N skipped".
#   tests/run_all.sh BUILD_DIR [unit|e2e|all]
# unit: every build/tests/test_* Check binary (each Check test counts once).
# e2e:  every e2e/test_*.sh script (each script counts once; exit 77 = skipped, with its printed reason).
# gpu:  build/tests/gpu/* binaries run only where a GPU is present; otherwise they are reported skipped (those
#       whose --help offers --host-checks still run the checks that need no GPU).
set -uo pipefail
BUILD="${1:-build}"; WHAT="${2:-all}"
export LLMR_BUILD="$(cd "$BUILD" && pwd)"
export LLMR_CACHE="${LLMR_CACHE:-$HOME/.cache/llmr}"
passed=0; failed=0; skipped=0; failures=()
log_dir="$BUILD/test-logs"; mkdir -p "$log_dir"

run_unit() {
  for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    out="$log_dir/$name.log"
    start=$(date +%s)
    timeout 600 "$t" >"$out" 2>&1; rc=$?
    line=$(grep -E '^[0-9]+%: Checks: [0-9]+' "$out" | tail -1)
    if [ -z "$line" ]; then
      echo "FAIL $name (rc=$rc, no Check summary; see $out)"; tail -20 "$out"
      failed=$((failed+1)); failures+=("$name"); continue
    fi
    n=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
    f=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
    e=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
    s=$(grep -c '^SKIP' "$out")
    bad=$((f+e)); ok=$((n-bad-s))
    passed=$((passed+ok)); failed=$((failed+bad)); skipped=$((skipped+s))
    grep '^SKIP' "$out" | sed "s/^/  $name: /"
    if [ $bad -gt 0 ] || [ $rc -ne 0 ]; then
      echo "FAIL $name: $line"; grep -E ':(F|E):' "$out" | head -20
      [ $bad -gt 0 ] || { failed=$((failed+1)); }
      failures+=("$name")
    else
      echo "ok   $name: $n checks ($(( $(date +%s)-start ))s)"
    fi
  done
}

run_gpu() {
  for t in "$BUILD"/tests/gpu/*; do
    [ -x "$t" ] || continue
    name=gpu/$(basename "$t")
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
      # a binary whose --help offers --host-checks runs its checks that need no GPU here too (the help is read
      # whole first: `| grep -q` under pipefail failed when grep's early exit left the binary a SIGPIPE)
      help=$("$t" --help 2>/dev/null || true)
      if [[ "$help" == *--host-checks* ]]; then
        hlog="$log_dir/$(basename "$t").host.log"
        if timeout 120 "$t" --host-checks >"$hlog" 2>&1; then
          echo "ok   $name --host-checks: $(tail -1 "$hlog")"; passed=$((passed+1))
        else
          echo "FAIL $name --host-checks"; tail -20 "$hlog"; failed=$((failed+1)); failures+=("$name --host-checks")
        fi
      fi
      echo "skip $name: no NVIDIA GPU on this machine (run it on the GPU machine: see docs/testing.md)"
      skipped=$((skipped+1)); continue
    fi
    if timeout 600 "$t" >"$log_dir/$(basename "$t").log" 2>&1; then
      echo "ok   $name"; passed=$((passed+1))
    else
      echo "FAIL $name"; tail -20 "$log_dir/$(basename "$t").log"; failed=$((failed+1)); failures+=("$name")
    fi
  done
}

run_e2e() {
  for t in e2e/test_*.sh; do
    [ -f "$t" ] || continue
    name=$(basename "$t" .sh)
    out="$log_dir/e2e_$name.log"
    start=$(date +%s)
    timeout 900 bash "$t" >"$out" 2>&1; rc=$?
    if [ $rc -eq 0 ]; then
      echo "ok   e2e/$name ($(( $(date +%s)-start ))s)"; passed=$((passed+1))
    elif [ $rc -eq 77 ]; then
      echo "skip e2e/$name: $(grep -m1 '^SKIP' "$out" || echo 'no reason printed')"; skipped=$((skipped+1))
    else
      echo "FAIL e2e/$name (rc=$rc; log $out)"; tail -30 "$out"; failed=$((failed+1)); failures+=("e2e/$name")
    fi
  done
}

case "$WHAT" in
  unit) run_unit; run_gpu ;;
  e2e)  run_e2e ;;
  *)    run_unit; run_gpu; run_e2e ;;
esac
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "Summary: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
