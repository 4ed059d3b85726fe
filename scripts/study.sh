#!/usr/bin/env bash
# The CATNIP gap study (docs/reproduction.md, "The gap, factor by factor") in one command: the
# points of scenarios/catnip-study-sim.yaml (Tables II-X layout) and/or catnip-study-wan.yaml
# (Table XI) for each seed, in parts (`catnip run --only`), then the study's table over every part
# and seed (`catnip report RUN... --layout catnip-study`).
#   STUDY   sim | wan | both (default both)
#   SEEDS   seeds (default "1 2 3")
#   PARTS   ends | single | reverse | all (default all): `ends` is today and the period set, the
#           widest gap; `single` each factor alone; `reverse` each taken out of the period set
#   BUFFERS the Table XI buffers (default "64KB 128KB")
#   JOBS    points side by side for the Tables II-X study (default 2; Table XI's always 1: its
#           zero-think-time load is near the real-time line alone, docs/fidelity.md)
# Extra arguments go to every `catnip run`. Every point is flagged for real time; the table
# counts only the points that kept it, and says which it left out.
set -euo pipefail
cd "$(dirname "$0")/.."
study=${STUDY:-both}
parts=${PARTS:-all}
jobs=${JOBS:-2}
start=$(date +%s)
case "$study" in sim|wan|both) ;; *) echo "STUDY must be sim, wan or both, not '$study'" >&2; exit 2;; esac
case "$parts" in ends|single|reverse|all) ;; *) echo "PARTS must be ends, single, reverse or all, not '$parts'" >&2; exit 2;; esac
# The schemes of each part, as the scenario files name them (without the WAN's base-/spm- prefix).
sim_single="iw rto control bytes recovery acks growth think"
wan_single="iw rto cc recovery mss"
schemes() {  # kind part -> scheme names
  local single; if [ "$1" = sim ]; then single=$sim_single; else single=$wan_single; fi
  case "$2" in
    ends) echo "today period";;
    single) echo "$single";;
    reverse) for f in $single; do printf 'period-%s ' "$f"; done; echo;;
  esac
}
declare -A ids=()
run() {  # kind, then catnip run arguments
  local kind=$1; shift
  local out; out=$(mktemp)
  if ! .venv/bin/catnip run "$@" --no-report | tee "$out"; then
    echo "note: a part did not end with every point done; the table leaves out the points that failed" >&2
  fi
  local id; id=$(awk '/^run [0-9a-zA-Z._-]+:/{print $2; exit}' "$out" | tr -d ':')
  rm -f "$out"
  if [ -n "$id" ]; then ids[$kind]="${ids[$kind]:+${ids[$kind]} }$id"; fi
}
if [ "$parts" = all ]; then part_list="ends single reverse"; else part_list=$parts; fi
for seed in ${SEEDS-1 2 3}; do
  for part in $part_list; do
    if [ "$study" != wan ]; then
      only=(); for s in $(schemes sim "$part"); do only+=(--only "scheme=$s"); done
      run sim scenarios/catnip-study-sim.yaml --seed "$seed" --jobs "$jobs" "${only[@]}" "$@"
    fi
    if [ "$study" != sim ]; then
      only=(); for b in ${BUFFERS-64KB 128KB}; do only+=(--only "topology.bottleneck.buffer=$b"); done
      for s in $(schemes wan "$part"); do only+=(--only "scheme=base-$s" --only "scheme=spm-$s"); done
      run wan scenarios/catnip-study-wan.yaml --seed "$seed" "${only[@]}" "$@"
    fi
  done
done
echo
if [ ${#ids[@]} -eq 0 ]; then echo "no run recorded: see the errors above" >&2; exit 1; fi
for kind in sim wan; do
  if [ -n "${ids[$kind]:-}" ]; then
    # Without the ends part there is no 'today' or 'period' to read the factors against: the table
    # is printed over these runs together with the ends' runs (`catnip list` names them).
    # shellcheck disable=SC2086 # the ids are one word each
    if ! .venv/bin/catnip report ${ids[$kind]} --layout catnip-study; then
      echo "note: print the $kind table with the runs of its ends part too: catnip report ${ids[$kind]} ENDS_RUNS... --layout catnip-study" >&2
    fi
    echo
  fi
done
echo "gap study: runs ${ids[*]}; wall clock $(( $(date +%s) - start )) s"
