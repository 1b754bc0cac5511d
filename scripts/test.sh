#!/usr/bin/env bash
# The tests, as CI runs them: the linters, then the unit and local tests, then the cluster
# tests (root: network namespaces, Slurm, Podman), each stage only if the one before passed,
# so that a broken change fails in minutes (the tests marked long run beside those stages).
# pytest runs two lanes (pytest-xdist, each worker on CPUs of its own: tests/conftest.py);
# PREFLIGHT_LANES sets how many. Each stage leaves a JUnit file in test-results/, and prints
# every test that took a second or more.
# Run after scripts/setup.sh; extra arguments go to both pytest stages (-x, -k ...).
set -euo pipefail
cd "$(dirname "$0")/.."
lanes=${PREFLIGHT_LANES:-2}
results=test-results
mkdir -p "$results"
rm -f "$results"/*.xml "$results"/timings-*.json
# Each test's time by what was running (tests/timeledger.py), added up at the end.
export PREFLIGHT_TIMINGS=${PREFLIGHT_TIMINGS:-$PWD/$results}

stage() {
  local name=$1 rc=0; shift
  local start=$SECONDS
  echo "=== $name"
  "$@" || rc=$?
  echo "=== $name: $((SECONDS - start)) s"
  return "$rc"
}

stage lint .venv/bin/ruff check .
stage types .venv/bin/mypy preflight checks inventory
stage types-of-tests .venv/bin/mypy --allow-untyped-defs --allow-incomplete-defs \
  --allow-untyped-calls tests bench scripts
# pytest's exit 5 (no test selected, as -k may leave a stage) is not a failure.
pytest_stage() {
  local name=$1 n=$2 rc=0; shift 2
  stage "$name" .venv/bin/pytest -n "$n" --durations=0 --durations-min=1 \
    --junitxml="$results/$name.xml" "$@" || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then exit "$rc"; fi
}
# Every folder under tests/ is collected by each stage; the marks divide them (tests/conftest.py
# marks every test under tests/cluster "cluster", tests/gpu's modules mark themselves "gpu"),
# so that a new folder of tests is run without being listed here.
# The tests marked long (a job watched for ten minutes) run beside the lanes, from the unit
# stage on, in a process of their own on every CPU: their job sleeps most of its time. Their
# output is printed once they end, before the tests marked alone; stopped with SIGINT (so that
# their clusters are taken down) where a stage before fails. -rP: what they print when they
# pass too (the figures their job measured).
long_log="$results/cluster-long.log"
# Made once the cluster stage is over: the long tests plant their faults only then (the
# lanes' load starves the simulated hosts unevenly: tests/cluster/test_watch_rhythm.py).
lanes_done="$PWD/$results/lanes-done"
rm -f "$lanes_done"
PREFLIGHT_LANES_DONE=$lanes_done .venv/bin/pytest -n 0 -rP --durations=0 --durations-min=1 \
  --junitxml="$results/cluster-long.xml" -m long tests "$@" > "$long_log" 2>&1 &
long_pid=$!
long_start=$SECONDS
stop_long() {
  if kill -INT "$long_pid" 2>/dev/null; then
    wait "$long_pid" || true
  fi
}
trap stop_long EXIT
pytest_stage unit-and-local "$lanes" -m "not cluster and not gpu and not alone and not long" \
  tests "$@"
pytest_stage cluster "$lanes" -m "(cluster or gpu) and not alone and not long" tests "$@"
touch "$lanes_done"
echo "=== cluster-long"
long_rc=0
wait "$long_pid" || long_rc=$?
trap - EXIT
cat "$long_log"
echo "=== cluster-long: $((SECONDS - long_start)) s (beside the stages above)"
if [ "$long_rc" -ne 0 ] && [ "$long_rc" -ne 5 ]; then exit "$long_rc"; fi
# The tests marked alone run last, one at a time, with every CPU of the machine theirs: a
# simulated job whose figures the watch must tell apart needs more than a lane's share.
pytest_stage cluster-alone 0 -m alone tests "$@"
# Where each module's time went (test-results/timings.md), and one line for the whole suite.
# A whole run (no arguments that select tests) refreshes the durations the next run's lanes
# go by (tests/durations.json: commit it with the change that moved them).
.venv/bin/python scripts/timings.py "$results"/timings-*.json > "$results/timings.md" || true
if [ "$#" -eq 0 ]; then
  .venv/bin/python scripts/durations.py --write "$results"/*.xml
else
  .venv/bin/python scripts/durations.py "$results"/*.xml
fi
