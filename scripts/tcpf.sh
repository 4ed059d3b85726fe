#!/usr/bin/env bash
# The TCP-friendly marking paper's experiments (Lo Monaco, Feroz, Kalyanaraman, Xia, section 6) in
# one command: the grid of Tables 4-7 (scenarios/tcpf-grid.yaml, 52 points) once per seed with the
# Linux 2.2 TCP profile, then once with today's Linux TCP for comparison; then the tables.
#   SEEDS   seeds of the period profile (default "1 2 3": the tables' intervals are over them)
#   MODERN  seeds of the modern-TCP comparison (default "1"; empty: none)
#   JOBS    points side by side (default 2; 1: one after another)
#   QUICK=1 only scenarios/tcpf-quick.yaml (Table 4, 50 flows, seven cases: about 8 minutes)
# Extra arguments go to every `catnip run`. Every point is flagged for real time in its run and
# in the tables ('*': a row with a point that did not keep it).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-2}
start=$(date +%s)
ids=()
run() {  # scenario, then catnip run options; appends the run id
  local out; out=$(mktemp)
  if ! .venv/bin/catnip run "$@" --jobs "$jobs" --no-report | tee "$out"; then
    echo "note: $1 $* did not end with every point done; the tables leave out the points that failed" >&2
  fi
  local id; id=$(awk '/^run [0-9a-zA-Z._-]+:/{print $2; exit}' "$out" | tr -d ':')
  rm -f "$out"
  if [ -n "$id" ]; then ids+=("$id"); fi
}
if [ "${QUICK:-0}" = 1 ]; then
  run scenarios/tcpf-quick.yaml "$@"
else
  for seed in ${SEEDS-1 2 3}; do run scenarios/tcpf-grid.yaml --seed "$seed" "$@"; done
  for seed in ${MODERN-1}; do run scenarios/tcpf-grid.yaml --seed "$seed" --set tcp.profile=modern "$@"; done
fi
echo
if [ ${#ids[@]} -eq 0 ]; then echo "no run recorded: see the errors above" >&2; exit 1; fi
.venv/bin/catnip report "${ids[@]}" --layout tcpf-tables
echo "TCP-friendly marking: runs ${ids[*]}; wall clock $(( $(date +%s) - start )) s with --jobs $jobs"
