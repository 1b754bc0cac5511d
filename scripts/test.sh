#!/usr/bin/env bash
# The tests, as CI runs them: the linters, then the unit and local tests, then the cluster
# tests (root: network namespaces, Slurm, Podman), each stage only if the one before passed,
# so that a broken change fails in minutes. pytest runs two lanes (pytest-xdist, each worker
# on CPUs of its own: tests/conftest.py); PREFLIGHT_LANES sets how many. Each stage leaves a
# JUnit file in test-results/, and prints every test that took a second or more.
# Run after scripts/setup.sh; extra arguments go to both pytest stages (-x, -k ...).
set -euo pipefail
cd "$(dirname "$0")/.."
lanes=${PREFLIGHT_LANES:-2}
results=test-results
mkdir -p "$results"
rm -f "$results"/*.xml

stage() {
  local name=$1; shift
  local start=$SECONDS
  echo "=== $name"
  "$@"
  echo "=== $name: $((SECONDS - start)) s"
}

stage lint .venv/bin/ruff check .
stage types .venv/bin/mypy preflight checks inventory
stage types-of-tests .venv/bin/mypy --allow-untyped-defs --allow-incomplete-defs \
  --allow-untyped-calls tests bench scripts
pytest_stage() {
  local name=$1; shift
  stage "$name" .venv/bin/pytest -n "$lanes" --durations=0 --durations-min=1 \
    --junitxml="$results/$name.xml" "$@"
}
pytest_stage unit-and-local tests/unit tests/local "$@"
pytest_stage cluster tests/cluster tests/gpu "$@"
# One line for the whole suite, and the measured durations the next run's lanes go by.
.venv/bin/python scripts/durations.py "$results"/unit-and-local.xml "$results"/cluster.xml
