#!/usr/bin/env bash
# The main job: a short default scenario, its table, then where to look at results.
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:-scenarios/quick.yaml}
.venv/bin/catnip check --brief
out=$(mktemp)
trap 'rm -f "$out"' EXIT
.venv/bin/catnip run "$scenario" --report | tee "$out"
run_id=$(awk '/^run [0-9]+-/{print $2; exit}' "$out" | tr -d ':')
echo
echo "Results are in $(.venv/bin/python -c 'from testbed import paths; print(paths.database())') (run ${run_id})."
echo "The dashboard is not built yet (it is its own issue); until then: .venv/bin/catnip report ${run_id}"
