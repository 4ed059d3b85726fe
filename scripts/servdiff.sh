#!/usr/bin/env bash
# Nouredine and Tobagi's service-differentiation experiments (Computer Networks 40, 2002) in one
# command, on the tree scaled by users (docs/reproduction-service-differentiation.md):
#   1. scenarios/sd-fig2-droptail.yaml: DropTail over five bottleneck rates (Figs 2-3);
#   2. scenarios/sd-schemes.yaml: the schemes at one bottleneck (Figs 7-9, 12-15);
#   3. scenarios/sd-range.yaml: APPL and TCP-DS over the other bottleneck rates (Figs 7, 12, 14);
#   4. scenarios/sd-longftp.yaml: one long FTP per pair, DropTail against TCP-DS and the 200 ms
#      connections' thresholds swept (Figs 16-17);
# once per seed, then the tables (catnip report --layout servdiff) and the CCDF figures.
#   SEEDS   seeds (default "1")
#   JOBS    points side by side (default 1: each point's 40 hosts want the whole machine)
#   ONLY    fig2 | schemes | range | longftp (default: all four)
#   OUT     folder for the figures (default docs/figures/servdiff)
# Extra arguments go to every `catnip run`. Every point is flagged for real time in its run and in
# the tables ('*': a scheme with a point that did not keep it).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-1}
out_dir=${OUT:-docs/figures/servdiff}
start=$(date +%s)
declare -A ids=()
run() {  # key, scenario, then catnip run options
  local key=$1; shift
  local out; out=$(mktemp)
  if ! .venv/bin/catnip run "$@" --jobs "$jobs" --no-report | tee "$out"; then
    echo "note: $* did not end with every point done; the tables leave out the points that failed" >&2
  fi
  local id; id=$(awk '/^run [0-9a-zA-Z._-]+:/{print $2; exit}' "$out" | tr -d ':')
  rm -f "$out"
  if [ -n "$id" ]; then ids[$key]="${ids[$key]:+${ids[$key]}+}$id"; fi
}
want() { [ -z "${ONLY:-}" ] || [ "$ONLY" = "$1" ]; }
for seed in ${SEEDS-1}; do
  if want fig2; then run fig2 scenarios/sd-fig2-droptail.yaml --seed "$seed" "$@"; fi
  if want schemes; then run schemes scenarios/sd-schemes.yaml --seed "$seed" "$@"; fi
  if want range; then run range scenarios/sd-range.yaml --seed "$seed" "$@"; fi
  if want longftp; then run longftp scenarios/sd-longftp.yaml --seed "$seed" "$@"; fi
done
echo
if [ ${#ids[@]} -eq 0 ]; then echo "no run recorded: see the errors above" >&2; exit 1; fi
mkdir -p "$out_dir"
for key in "${!ids[@]}"; do
  runs=${ids[$key]}
  if [ "$key" = longftp ]; then
    .venv/bin/catnip report "$runs" --layout servdiff-fair
    .venv/bin/catnip report "$runs" --figure fair-share --out "$out_dir/$key-fair-share.svg" >/dev/null
    .venv/bin/catnip report "$runs" --figure flow-throughput --out "$out_dir/$key-flow-throughput.svg" >/dev/null
    continue
  fi
  .venv/bin/catnip report "$runs" --layout servdiff
  for fig in web-1.0 web-1.1 telnet ftp-probes; do
    .venv/bin/catnip report "$runs" --figure "$fig" --out "$out_dir/$key-$fig.svg" >/dev/null
  done
  .venv/bin/catnip report "$runs" --figure telnet --tag rtt80ms --out "$out_dir/$key-telnet-rtt80ms.svg" >/dev/null
done
echo "service differentiation: runs ${ids[*]}; figures in $out_dir; wall clock $(( $(date +%s) - start )) s with --jobs $jobs"
