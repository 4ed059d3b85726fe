#!/usr/bin/env bash
# The newCWV paper's experiments (Hossain and Fairhurst, sections 3-4) in one command: Fig. 5
# (pipeACK filter trace), Fig. 7 (no rate limit), Figs 8-9 (2 Mbit/s, 30 KB), Table 2 (with FTP),
# Table 3 and Fig. 10 (pacing), Fig. 11 (FTP fairness); then their reports and the wall clock.
# Points of a scenario run side by side (JOBS, default 2; JOBS=1 one after another). The sender
# parameters (pacing, the trace) are keyed by network namespace, so any scenario can. Table 3's two
# points kept real time side by side with run.keep_awake (docs/reproduction-newcwv.md); Fig. 10
# and Fig. 11 still run one point at a time: side by side they have not been measured.
# Extra arguments go to every `catnip run` (e.g. --seed 2: one run per seed gives the repetitions
# the reports' intervals are computed from: `catnip report RUN1 RUN2 ... --layout newcwv-gain`).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-2}
start=$(date +%s)
ids=()
scenarios=(newcwv-fig5-pipeack newcwv-fig7-unlimited newcwv-fig8-congested newcwv-table2-ftp newcwv-table3-paced
           newcwv-fig10-pacing-seq newcwv-fig11-fairness)
declare -A layouts=([newcwv-fig5-pipeack]="newcwv-trace" [newcwv-fig7-unlimited]="newcwv-gain"
                    [newcwv-fig8-congested]="newcwv-gain newcwv-loss" [newcwv-table2-ftp]="newcwv-gain newcwv-loss"
                    [newcwv-table3-paced]="newcwv-gain newcwv-loss" [newcwv-fig10-pacing-seq]=""
                    [newcwv-fig11-fairness]="ftp-throughput")
serial=" newcwv-fig10-pacing-seq newcwv-fig11-fairness "
for s in "${scenarios[@]}"; do
  out=$(mktemp)
  j=$jobs; [[ $serial == *" $s "* ]] && j=1
  if ! .venv/bin/catnip run "scenarios/$s.yaml" --jobs "$j" "$@" | tee "$out"; then
    echo "note: $s did not end with every point done; its report says which" >&2
  fi
  ids+=("$(awk '/^run [0-9a-zA-Z._-]+:/{print $2; exit}' "$out" | tr -d ':')")
  rm -f "$out"
done
echo
for i in "${!ids[@]}"; do
  s=${scenarios[$i]}
  echo "== $s"
  if [ -z "${ids[$i]}" ]; then echo "(no run: see the error above)"; continue; fi
  for l in ${layouts[$s]}; do .venv/bin/catnip report "${ids[$i]}" --layout "$l"; echo; done
  [ "$s" = newcwv-fig10-pacing-seq ] && .venv/bin/catnip burst-seq "${ids[$i]}" --out "newcwv-fig10-${ids[$i]}.svg"
  echo
done
echo "newCWV experiments: runs ${ids[*]}; wall clock $(( $(date +%s) - start )) s with --jobs $jobs"
