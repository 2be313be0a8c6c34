# shellcheck shell=bash
# ctest under the sanitizers, with the one failure that is the checker's and not the code's handled:
# LeakSanitizer's exit-time tracer crashing ("Tracer caught signal 11 ... LeakSanitizer has
# encountered a fatal error", google/sanitizers#1353). Sourced by scripts/sanitize.sh; tested by
# tests/sanitizers/test_lsan_retry.sh.
#
# ctest_with_tracer_retry BUILD [CTEST_ARG...]: runs `ctest --test-dir BUILD CTEST_ARG...`. Where
# tests failed and the log shows the tracer's fatal error, the failed tests run once more, alone,
# with the same options. Where they fail again with the tracer's error and the log holds no report
# (no leak, no ASan error, no UBSan runtime error), they run a third time with ASan and UBSan but
# without the leak check (detect_leaks=0), saying so: the leak check cannot run in that process on
# this machine, and everything else about the test still decides. A leak report, or any other
# failure, fails as before. Returns ctest's last exit status.
tracer_failed() {  # LOG
  grep -q 'LeakSanitizer has encountered a fatal error' "$1"
}

sanitizer_reported() {  # LOG: a report from the code under test (not the checker failing)
  grep -Eq 'ERROR: (LeakSanitizer: detected memory leaks|AddressSanitizer)|runtime error:' "$1"
}

ctest_with_tracer_retry() {
  local build=$1
  shift
  local log=$build/Testing/Temporary/LastTest.log
  local status=0
  ctest --test-dir "$build" "$@" || status=$?
  if [ "$status" -eq 0 ] || ! tracer_failed "$log"; then
    return "$status"
  fi
  echo "lsan_retry: LeakSanitizer's tracer failed (not a leak report); the failed tests again:"
  status=0
  ctest --test-dir "$build" --rerun-failed --output-on-failure "$@" || status=$?
  if [ "$status" -eq 0 ] || ! tracer_failed "$log" || sanitizer_reported "$log"; then
    return "$status"
  fi
  local failed
  failed=$(cut -d: -f2 "$build/Testing/Temporary/LastTestsFailed.log" 2>/dev/null | paste -sd' ' || true)
  echo "lsan_retry: the tracer failed again, with no report from ASan, UBSan or LSan; LeakSanitizer" \
       "cannot check these tests on this machine ($failed); once more with ASan and UBSan only" \
       "(detect_leaks=0):"
  status=0
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    ctest --test-dir "$build" --rerun-failed --output-on-failure "$@" || status=$?
  return "$status"
}
