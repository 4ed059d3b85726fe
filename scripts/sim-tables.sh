#!/usr/bin/env bash
# CATNIP's simulation experiments as emulation in one command (section V): Tables II-IV (senders
# under DropTail), V-VII (senders under CATNIP-Good with SPM), VIII-X and Fig. 7 (the five router
# policies), fairness (V-E) and HTTP/1.1 (V-F); then their reports and the wall clock.
# Points of a scenario run side by side (JOBS, default 2; JOBS=1 one after another). More than one
# needs the Linux bridge as access switch, the `auto` choice where the kernel has no OVS datapath;
# where it has one, pass JOBS=1 or ARGS="--set topology.access_switch=linuxbridge".
# Extra arguments go to every `catnip run` (e.g. --seed 2).
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
jobs=${JOBS:-2}
start=$(date +%s)
ids=()
scenarios=(catnip-sim-routers catnip-sim-senders-droptail catnip-sim-senders-catnip-good catnip-sim-fairness
           catnip-sim-http11)
if [ -n "${PROFILE:-}" ]; then
  # The senders and fairness scenarios vary the TCP themselves: a profile runs the router set.
  echo "PROFILE=$PROFILE: the router set (catnip-sim-routers) only" >&2
  scenarios=(catnip-sim-routers)
fi
# PERIOD=1: the router set under the gap study's whole period set (ns2-reno TCP, unmarked control
# segments, a byte-counted buffer, Mah's think times: scenarios/catnip-sim-routers-period.yaml).
if [ -n "${PERIOD:-}" ]; then
  if [ -n "${PROFILE:-}" ]; then echo "PERIOD=1 names its own TCP (ns2-reno): leave PROFILE out" >&2; exit 2; fi
  echo "PERIOD=1: the router set under the study's period set (catnip-sim-routers-period) only" >&2
  scenarios=(catnip-sim-routers-period)
fi
for s in "${scenarios[@]}"; do
  out=$(mktemp)
  if ! .venv/bin/catnip run "scenarios/$s.yaml" --jobs "$jobs" "$@" | tee "$out"; then
    echo "note: $s did not end with every point done; its report says which" >&2
  fi
  ids+=("$(awk '/^run [0-9a-zA-Z._-]+:/{print $2; exit}' "$out" | tr -d ':')")
  rm -f "$out"
done
echo
for i in "${!ids[@]}"; do
  echo "== ${scenarios[$i]}"
  if [ -z "${ids[$i]}" ]; then echo "(no run: see the error above)"; continue; fi
  .venv/bin/catnip report "${ids[$i]}"
  .venv/bin/catnip report "${ids[$i]}" --loss
  [ "${scenarios[$i]}" = catnip-sim-fairness ] && .venv/bin/catnip report "${ids[$i]}" --by-sender
  echo
done
echo "Simulation tables: runs ${ids[*]}; wall clock $(( $(date +%s) - start )) s with --jobs $jobs"
