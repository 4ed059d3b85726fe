#!/usr/bin/env bash
# CATNIP Table XI in one command: the baseline (Linux TCP, FIFO routers), CATNIP with the paper's
# partial SPM and with full SPM (both with CATNIP-Good routers), each over the four buffer sizes,
# then the table of relative download times. Extra arguments go to every `catnip run`
# (e.g. --seed 2, or --set 'sweep.topology.bottleneck.buffer=[64KB]' for a shorter look).
set -euo pipefail
cd "$(dirname "$0")/.."
# PROFILE=NAME (a `tcp.profile`: linux-2.4, ns2-reno, ...; docs/period-tcp.md) runs every point with
# that period TCP: each field of the profile is set explicitly, so it wins over the scenario's own
# (the WAN scenarios name cubic), and tcp.profile records the name.
profile_sets=()
if [ -n "${PROFILE:-}" ]; then
  sets=$(.venv/bin/python -m catnip.spec.senders --as-set "$PROFILE")
  read -r -a profile_sets <<< "$sets"
fi
set -- "${profile_sets[@]}" "$@"
start=$(date +%s)
ids=()
for s in catnip-wan-baseline catnip-wan-partial-spm catnip-wan-catnip; do
  out=$(mktemp)
  if ! .venv/bin/catnip run "scenarios/$s.yaml" "$@" | tee "$out"; then
    echo "note: $s did not end with every point done; its report says which" >&2
  fi
  ids+=("$(awk '/^run [0-9]+-/{print $2; exit}' "$out" | tr -d ':')")
  rm -f "$out"
done
echo
.venv/bin/catnip compare "${ids[0]}" "${ids[1]}" "${ids[2]}"
echo
for id in "${ids[@]}"; do .venv/bin/catnip report "$id" --loss; echo; done
echo "Table XI: runs ${ids[*]}; wall clock $(( $(date +%s) - start )) s"
