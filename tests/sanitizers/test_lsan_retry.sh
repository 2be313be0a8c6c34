#!/usr/bin/env bash
# scripts/lib/lsan_retry.sh on a made-up ctest directory (a CTestTestfile.cmake needs no build):
# a test whose process the tracer cannot check passes without the leak check, saying so; a leak
# report, an ASan error and an ordinary failure each still fail; a test that fails once passes
# on the rerun; a passing suite runs once.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../../scripts/lib/lsan_retry.sh
source "$root/scripts/lib/lsan_retry.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/halo-lsan-retry-XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
tracer='echo "Tracer caught signal 11: addr=0x0"; echo "==7==LeakSanitizer has encountered a fatal error."'

# suite NAME BODY...: a ctest directory whose tests run the given bash bodies (test_1, test_2...).
suite() {
  local dir=$work/$1
  shift
  mkdir -p "$dir"
  : >"$dir/CTestTestfile.cmake"
  local i=0 body
  for body in "$@"; do
    i=$((i + 1))
    printf '%s\n' "$body" >"$dir/t$i.sh"
    echo "add_test(test_$i bash $dir/t$i.sh)" >>"$dir/CTestTestfile.cmake"
  done
  echo "$dir"
}

# expect NAME WANT_STATUS WANT_LINE DIR: runs the retry on DIR; WANT_STATUS is 0 or "fail".
expect() {
  local name=$1 want=$2 line=$3 dir=$4 status=0
  ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 ctest_with_tracer_retry "$dir" --output-on-failure \
    >"$dir.log" 2>&1 || status=$?
  local ok=1
  if [ "$want" = 0 ]; then [ "$status" -eq 0 ] || ok=0; else [ "$status" -ne 0 ] || ok=0; fi
  if [ -n "$line" ] && ! grep -q -- "$line" "$dir.log"; then ok=0; fi
  if [ "$ok" = 1 ]; then
    echo "ok   $name (status $status)"
  else
    echo "FAIL $name: status $status, want $want${line:+ and a line with '$line'}; log:"
    sed 's/^/     /' "$dir.log"
    failures=$((failures + 1))
  fi
}

# Checks ASAN_OPTIONS the way ASan does: the last detect_leaks wins.
leak_check_off='case "${ASAN_OPTIONS##*detect_leaks=}" in 0*) exit 0 ;; esac'

expect "passing suite runs once" 0 "" \
  "$(suite pass 'exit 0' 'exit 0')"
! grep -q "lsan_retry" "$work/pass.log" || {
  echo "FAIL passing suite: retried"; failures=$((failures + 1)); }

expect "tracer fails every time: passes without the leak check" 0 "detect_leaks=0" \
  "$(suite tracer 'exit 0' "$leak_check_off; $tracer; exit 1")"
grep -q "cannot check these tests on this machine (test_2)" "$work/tracer.log" || {
  echo "FAIL tracer: the message does not name test_2"; failures=$((failures + 1)); }

counter=$work/count
expect "tracer fails once: the rerun decides" 0 "the failed tests again" \
  "$(suite once "if [ ! -e $counter ]; then touch $counter; $tracer; exit 1; fi; exit 0")"
! grep -q "detect_leaks=0" "$work/once.log" || {
  echo "FAIL once: went on to detect_leaks=0"; failures=$((failures + 1)); }

expect "a leak report beside a tracer failure still fails" fail "" \
  "$(suite leak "$leak_check_off; $tracer; exit 1" \
               "$leak_check_off; echo '==8==ERROR: LeakSanitizer: detected memory leaks'; exit 1")"
! grep -q "detect_leaks=0" "$work/leak.log" || {
  echo "FAIL leak: the leak check was turned off"; failures=$((failures + 1)); }

expect "an ASan error still fails" fail "" \
  "$(suite asan "$tracer; echo '==9==ERROR: AddressSanitizer: heap-use-after-free'; exit 1")"

expect "an ordinary failure without the tracer message is not retried" fail "" \
  "$(suite plain 'echo "expected 3, got 4"; exit 1')"
! grep -q "lsan_retry" "$work/plain.log" || {
  echo "FAIL plain: retried"; failures=$((failures + 1)); }

expect "a test failing for its own reason fails even without the leak check" fail "detect_leaks=0" \
  "$(suite own "$tracer; exit 1")"

[ "$failures" -eq 0 ] && echo "test_lsan_retry: all cases pass" || echo "$failures failure(s)"
exit $((failures > 0))
