#!/usr/bin/env bash
# Flakiness check (issue 26): runs the test suite N times in a row while another CPU-heavy
# process keeps one core busy, and prints how many runs passed and which tests failed in each.
# A test that passes on a quiet machine and fails under load depends on timing: a defect.
#
#   scripts/flaky-check.sh [-n N] [-b BUILD_DIR] [-j JOBS] [-- CTEST_ARGS...]
#
#   -n N      runs (default 5)
#   -b DIR    an already built build directory (default: build); the script runs `ctest` there
#   -j JOBS   ctest's parallelism (default: nproc, as `make test`)
#   CTEST_ARGS  passed to ctest, e.g. -- -L unit  or  -- -R kiln-test-autotune
#
# The load is `stress-ng --cpu 1` when stress-ng is installed, else a busy loop in bash; it is
# stopped when the script ends (also on Ctrl-C). Exit status: 0 when every run passed.
set -u
RUNS=5
BUILD=build
JOBS=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    -n) RUNS="$2"; shift 2 ;;
    -b) BUILD="$2"; shift 2 ;;
    -j) JOBS="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "flaky-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$RUNS" in ''|*[!0-9]*) echo "flaky-check: -n expects a count, got '$RUNS'" >&2; exit 2 ;; esac
if [ ! -f "$BUILD/CTestTestfile.cmake" ]; then
  echo "flaky-check: '$BUILD' is not a configured build directory (run 'make build' first)" >&2
  exit 2
fi

LOAD_PID=""
stop_load() {
  if [ -n "$LOAD_PID" ]; then
    kill "$LOAD_PID" 2>/dev/null
    wait "$LOAD_PID" 2>/dev/null
    LOAD_PID=""
  fi
}
trap 'stop_load' EXIT
trap 'stop_load; exit 130' INT TERM

if command -v stress-ng >/dev/null 2>&1; then
  stress-ng --cpu 1 --quiet &
  LOAD_PID=$!
  LOAD="stress-ng --cpu 1"
else
  # A busy loop in a child bash: one core kept busy until it is killed.
  bash -c 'while :; do :; done' &
  LOAD_PID=$!
  LOAD="a busy loop in bash (stress-ng is not installed)"
fi
echo "flaky-check: $RUNS run(s) of ctest -j $JOBS in $BUILD $* while $LOAD runs (pid $LOAD_PID)"

LOGDIR=$(mktemp -d)
passed=0
for i in $(seq 1 "$RUNS"); do
  start=$(date +%s)
  if (cd "$BUILD" && ctest --output-on-failure -j "$JOBS" "$@") >"$LOGDIR/run$i.log" 2>&1; then
    passed=$((passed + 1))
    result="passed"
  else
    result="FAILED: $(grep -E '^\s*[0-9]+ - ' "$LOGDIR/run$i.log" | sed 's/^ *//' | tr '\n' ';')"
  fi
  echo "run $i/$RUNS: $result ($(($(date +%s) - start)) s; log $LOGDIR/run$i.log)"
done
stop_load
echo "flaky-check: $passed of $RUNS runs passed under load"
[ "$passed" -eq "$RUNS" ]
