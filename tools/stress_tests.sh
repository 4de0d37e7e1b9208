#!/usr/bin/env bash
# The tests that wait on another process or thread, ROUNDS times in a row under one core of CPU load
# (issue 14: tests that cannot flake on timing). Usage: tools/stress_tests.sh [ROUNDS] [processes|threads|all]
# (default: 20 rounds of the tests that wait on other processes).
# A round stops at its first failure (-x); every round runs whatever happened before. Prints one line a round
# and the count of passes and failures; a failed round's output is kept in the log directory it names.
# STRESS_TESTS="tests/test_x.py ..." replaces the subset; STRESS_CPUS sets the load's workers (default 1).
set -uo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-20}"
case "$rounds" in ''|*[!0-9]*) echo "usage: tools/stress_tests.sh [ROUNDS] [processes|threads|all]" >&2; exit 2;; esac
# processes (the default): tests that wait on real daemon processes, CLI processes, pexpect terminals, MCP servers,
# killed writers. threads: tests that wait on servers or racers in threads of the test process.
processes="tests/test_approvals.py tests/test_daemon.py tests/test_daemon_preauth.py tests/test_sessions.py
  tests/test_mcp.py tests/test_chat.py tests/test_tui.py tests/test_memory_crash.py tests/test_memory_writers.py
  tests/test_audit_group_commit.py tests/test_setup_errors.py"
threads="tests/test_telegram.py tests/test_signal.py tests/test_gateways.py tests/test_audit.py tests/test_thread_races.py
  tests/test_watch_threads.py tests/test_protocol_fuzz.py tests/test_small_fixes.py tests/test_approval_content.py"
case "${2:-processes}" in
  processes) subset=($processes);; threads) subset=($threads);; all) subset=($processes $threads);;
  *) echo "usage: tools/stress_tests.sh [ROUNDS] [processes|threads|all]" >&2; exit 2;;
esac
[ -n "${STRESS_TESTS:-}" ] && subset=($STRESS_TESTS)
logs="$(mktemp -d "${TMPDIR:-/tmp}/stress_tests.XXXXXX")"
load=""
if command -v stress-ng >/dev/null 2>&1; then
  stress-ng --cpu "${STRESS_CPUS:-1}" --quiet &
  load=$!
  trap 'kill "$load" 2>/dev/null; wait "$load" 2>/dev/null' EXIT
  echo "load: stress-ng --cpu ${STRESS_CPUS:-1} (pid $load)"
else
  echo "stress-ng is not installed: running WITHOUT CPU load (apt-get install stress-ng for the real check)"
fi
echo "${#subset[@]} files, $rounds rounds; logs in $logs"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
passed=0; failed=0
for i in $(seq 1 "$rounds"); do
  start=$SECONDS
  export PASSEPARTOUT_HOME="$(mktemp -d)"
  if python -m pytest "${subset[@]}" -p no:cacheprovider -x -q > "$logs/round$i.log" 2>&1; then
    passed=$((passed + 1)); echo "round $i: pass ($((SECONDS - start)) s)"; rm -f "$logs/round$i.log"
  else
    failed=$((failed + 1)); echo "round $i: FAIL ($((SECONDS - start)) s): $logs/round$i.log"
    grep -E '^(FAILED|ERROR) ' "$logs/round$i.log" | sed 's/^/    /'
  fi
  rm -rf "$PASSEPARTOUT_HOME"
done
echo "$passed passed, $failed failed of $rounds rounds"
[ "$failed" -eq 0 ]
