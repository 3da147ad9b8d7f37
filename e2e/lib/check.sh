# shellcheck shell=bash
# e2e/lib/check.sh — a command's exit status and output against what its user should see.
#   . e2e/lib/check.sh; fail=0
#   check NAME EXPECTED_RC PATTERN -- command...
# Runs the command (stdout and stderr together into $out, its status into $rc), then prints "ok   NAME", or
# "FAIL NAME: ..." with the output's first $CHECK_LINES lines (default 20; 0: all of it) and sets fail=1, when the
# status is not EXPECTED_RC or the output does not contain PATTERN (a fixed string).
check() {
  local name=$1 want_rc=$2 pattern=$3 lines=${CHECK_LINES:-20}
  shift 4
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" != "$want_rc" ] || ! grep -qF -- "$pattern" <<<"$out"; then
    echo "FAIL $name: rc=$rc (want $want_rc), want '$pattern' in:"
    if [ "$lines" -gt 0 ]; then echo "$out" | head -"$lines"; else echo "$out"; fi
    # shellcheck disable=SC2034 # read by the sourcing script
    fail=1
  else
    echo "ok   $name"
  fi
}
