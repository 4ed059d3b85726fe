#!/usr/bin/env bash
# The main job: a short default scenario and its table, then the dashboard to look at it
# (Ctrl-C stops the dashboard). DASHBOARD=no skips the dashboard; PORT picks its port.
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:-scenarios/quick.yaml}
port=${PORT:-8080}
.venv/bin/catnip check --brief
out=$(mktemp)
trap 'rm -f "$out"' EXIT
.venv/bin/catnip run "$scenario" --report | tee "$out"
run_id=$(awk '/^run [0-9]+-/{print $2; exit}' "$out" | tr -d ':')
echo
echo "Results are in $(.venv/bin/python -c 'from testbed import paths; print(paths.database())') (run ${run_id})."
if [ "${DASHBOARD:-yes}" = no ]; then
  echo "Dashboard skipped (DASHBOARD=no); start it with: catnip web   (or read the table again: catnip report ${run_id})"
  exit 0
fi
echo "This run in the dashboard: http://127.0.0.1:${port}/runs/${run_id}"
exec .venv/bin/catnip web --port "$port"
