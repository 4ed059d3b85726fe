#!/usr/bin/env bash
# The fresh-machine tier (make test-fresh): proves the set-up on a bare Debian 12, because a green
# `make test` on a machine with the packages already present can hide a missing step.
#
# A root made by `debootstrap --variant=minbase bookworm` from this machine's Debian mirror, plus
# make and git (cached under $CATNIP_FRESH_CACHE, keyed by suite, variant, packages and mirror), is
# unpacked afresh for every run; this repository's HEAD commit is cloned into it (uncommitted files
# stay out) and, inside it, `scripts/setup.sh` then `make run DASHBOARD=no` must end with the run
# `done` and every page of the default scenario fetched (100 of 100).
#
# The root gets a mount and a PID namespace of its own and is entered by pivot_root: a chroot is not
# enough, since Mininet's mnexec enters the hosts' mount namespaces, which would leave the chroot.
# It shares this machine's network, /run (so the machine lock keeps it and other runs apart), /sys,
# /dev and cgroups. Carried in, as issue 47 allows: this machine's Rust toolchain (~/.cargo/bin and
# ~/.rustup, read-only; setup.sh would otherwise fetch one with rustup) and its local CA
# certificates (/usr/local/share/ca-certificates: needed where an egress proxy re-signs TLS).
# The .debs and crates it downloads are cached beside the base, so a repeat downloads little;
# every install, build and the run itself happen again each time.
#
# Teardown: everything started inside dies with the PID namespace, every mount with the mount
# namespace; the unpacked root is removed (CATNIP_FRESH_KEEP=1 keeps it). Ctrl-C or SIGTERM cancel
# the run inside first (it removes its own network), a second one kills the namespace at once.
set -euo pipefail

SELF=$(readlink -f "$0")
STAGE_IN_ROOT=/root/.catnip-fresh-stage.sh   # where this script sits inside the root
ORIGIN_IN_ROOT=/mnt/catnip-origin            # this repository, read-only, inside the root
CLONE_IN_ROOT=/root/catnip
SUITE=bookworm
VARIANT=minbase
INCLUDE=make,git        # what README's "A fresh machine" says to install before the two commands
EXPECTED_PAGES=100      # scenarios/quick.yaml: 10 clients x the 10 pages of Fig. 4, one round

say() { printf '\033[1m[test-fresh]\033[0m %s\n' "$*"; }
die() { echo "test-fresh: $*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
# Stage 3, inside the root (after pivot_root): clone, set up, run, check.
in_root() {
  cd /root
  git clone -q "$ORIGIN_IN_ROOT" "$CLONE_IN_ROOT"
  cd "$CLONE_IN_ROOT"
  git checkout -q --detach "$CATNIP_FRESH_COMMIT"
  say "inside a bare Debian $(cat /etc/debian_version), at commit $(git rev-parse --short HEAD)"

  local t0 t1 t2
  t0=$(date +%s)
  scripts/setup.sh
  t1=$(date +%s)
  say "setup.sh took $((t1 - t0)) s"

  # Another run on this machine holds the lock (a shared machine): wait until it ends, then retry.
  local out=/tmp/main-job.out attempt rc
  for attempt in 1 2 3 4 5; do
    set +e
    make run DASHBOARD=no 2>&1 | tee -i "$out"   # -i: Ctrl-C must not cut the run's teardown messages off
    rc=${PIPESTATUS[0]}
    set -e
    if [ "$rc" -ne 0 ] && grep -q "another catnip run is using this machine" "$out"; then
      say "the machine lock is held by another run (attempt $attempt): waiting for it to be released"
      flock /run/catnip/machine.lock true
      continue
    fi
    break
  done
  t2=$(date +%s)
  say "make run DASHBOARD=no took $((t2 - t1)) s (exit $rc)"

  local run_id
  run_id=$(sed -n 's/^Results are in .* (run \(.*\))\.$/\1/p' "$out" | tail -n1)
  [ -n "$run_id" ] || die "make run printed no run id (exit $rc); its output is above"
  verdict "$run_id"
  [ "$rc" -eq 0 ] || die "make run DASHBOARD=no exited $rc"
  say "PASS: setup.sh $((t1 - t0)) s, make run $((t2 - t1)) s"
}

# The database is the judge, not the run's exit code alone: the run's status and its pages fetched
# without error (CATNIP_DB, as for catnip, picks another database). Run from the clone's folder.
verdict() {
  .venv/bin/python - "$1" "$EXPECTED_PAGES" <<'EOF'
import sqlite3, sys
from testbed import paths
run_id, expected = sys.argv[1], int(sys.argv[2])
db = sqlite3.connect(paths.database())
row = db.execute("SELECT status, error FROM runs WHERE id = ?", (run_id,)).fetchone()
if row is None:
    sys.exit(f"test-fresh: FAIL: run {run_id} is not in {paths.database()}")
status, error = row
ok = db.execute("SELECT count(*) FROM pages WHERE run_id = ? AND error IS NULL", (run_id,)).fetchone()[0]
bad = db.execute("SELECT count(*) FROM pages WHERE run_id = ? AND error IS NOT NULL", (run_id,)).fetchone()[0]
rt = [r[0] for r in db.execute("SELECT realtime_ok FROM points WHERE run_id = ?", (run_id,))]
print(f"[test-fresh] run {run_id}: status {status}, {ok} of {expected} pages fetched, {bad} failed;"
      f" real time kept: {'yes' if rt and all(rt) else 'NO (not judged by this tier)'}")
if status != "done" or ok != expected or bad:
    sys.exit(f"test-fresh: FAIL: wanted status done and {expected} of {expected} pages"
             f" (status {status}{': ' + error if error else ''}, {ok} pages, {bad} failed)")
EOF
}

# ---------------------------------------------------------------------------------------------
# Stage 2, PID 1 of fresh mount and PID namespaces, still seeing this machine's files: mount what
# the root needs, pivot into it, and run stage 3 there with a clean environment.
enter() {
  local root=$1 repo=$2 cache=$3
  mount --make-rprivate /                 # nothing mounted here may show outside
  mount --bind "$root" "$root"            # pivot_root wants the new root to be a mount point
  mount -t proc proc "$root/proc"         # this PID namespace's processes only
  mount --rbind /sys "$root/sys"          # with /sys/fs/cgroup and /sys/fs/bpf under it
  mount --rbind /dev "$root/dev"
  mount --rbind /run "$root/run"          # the machine lock (/run/catnip), OVS, /run/netns
  ro_bind "$repo" "$root$ORIGIN_IN_ROOT"
  if [ -x "$HOME/.cargo/bin/cargo" ] && [ -d "${RUSTUP_HOME:-$HOME/.rustup}" ]; then
    ro_bind "$HOME/.cargo/bin" "$root/root/.cargo/bin"
    ro_bind "${RUSTUP_HOME:-$HOME/.rustup}" "$root/root/.rustup"
  fi
  mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"
  mount --bind "$cache/cargo-registry" "$root/root/.cargo/registry"
  cd "$root"
  mkdir -p .old-root
  pivot_root . .old-root
  cd /
  umount -l /.old-root
  rmdir /.old-root
  exec env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" CATNIP_FRESH_COMMIT="$CATNIP_FRESH_COMMIT" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash "$STAGE_IN_ROOT" --in-root
}

ro_bind() {
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mount -o remount,bind,ro "$2"
}

# ---------------------------------------------------------------------------------------------
# Stage 1, on this machine: the cached base, a fresh copy of it, then stages 2-3 in namespaces.
mirror() {
  # The first archive (not security) serving $SUITE in apt's configuration.
  if [ -n "${CATNIP_FRESH_MIRROR:-}" ]; then echo "$CATNIP_FRESH_MIRROR"; return; fi
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v suite="$SUITE" '
      /^[ \t]*$/ { if (uri != "" && ok) { print uri; exit } uri = ""; ok = 0; next }
      tolower($1) == "uris:" { uri = $2 }
      tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == suite) ok = 1 }
      END { if (uri != "" && ok) print uri }' "$f"
  done
  { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true; } |
    awk -v suite="$SUITE" '$1 == "deb" { u = ($2 ~ /^\[/) ? $3 : $2; s = ($2 ~ /^\[/) ? $4 : $3; if (s == suite) print u }'
}

outside() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, mount and PID namespaces)"
  local repo cache tmpbase
  repo=$(cd "$(dirname "$SELF")/.." && pwd)
  cache=${CATNIP_FRESH_CACHE:-/var/cache/catnip-fresh}
  tmpbase=${TMPDIR:-/var/tmp}
  for tool in unshare pivot_root flock git; do
    command -v "$tool" >/dev/null || die "$tool is missing (util-linux, git)"
  done
  if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap
  fi
  local url
  url=$(mirror | head -n1 || true)   # head may close the pipe early
  [ -n "$url" ] || die "no Debian mirror for $SUITE in /etc/apt/sources.list*; set CATNIP_FRESH_MIRROR=URL"
  CATNIP_FRESH_COMMIT=$(git -C "$repo" rev-parse HEAD)
  export CATNIP_FRESH_COMMIT

  mkdir -p "$cache"/{apt-archives/partial,cargo-registry}
  exec 9>"$cache/lock"
  flock -n 9 || { say "another test-fresh holds $cache/lock: waiting"; flock 9; }

  local key base t0 t1
  key=$(printf '%s\n' "$SUITE" "$VARIANT" "$INCLUDE" "$url" | sha256sum | cut -c1-16)
  base=$cache/base-$key.tar
  t0=$(date +%s)
  if [ ! -f "$base" ]; then
    say "no cached root ($base): debootstrap --variant=$VARIANT --include=$INCLUDE $SUITE from $url"
    BUILD=$(mktemp -d "$cache/build.XXXXXX")
    local build=$BUILD
    # debootstrap mounts /proc and /sys in its target: a namespace of its own takes them away with it.
    if ! unshare --mount --propagation private -- \
         debootstrap --variant="$VARIANT" --include="$INCLUDE" "$SUITE" "$build/root" "$url" \
         >"$build/debootstrap.log" 2>&1; then
      tail -n 20 "$build/debootstrap.log" >&2
      die "debootstrap failed (last lines above)"
    fi
    rm -f "$build/root/var/cache/apt/archives/"*.deb   # the cache is the base, not its downloads
    tar -C "$build/root" --numeric-owner -cf "$build/base.tar" .
    mv "$build/base.tar" "$base"
    rm -rf "$build"
    BUILD=
  fi
  t1=$(date +%s)
  say "base root ready in $((t1 - t0)) s ($base)"

  WORK=$(mktemp -d "$tmpbase/catnip-fresh.XXXXXX")
  local root=$WORK/root
  mkdir "$root"
  tar -C "$root" --numeric-owner -xpf "$base"
  # A fresh machine has name resolution and its site's CA certificates; and services its packages
  # would start (apache2 on :80, sshd on :22, OVS) must not start here, on this machine's network:
  # policy-rc.d is Debian's switch for that (setup.sh starts and stops what it needs itself).
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  mkdir -p "$root/usr/local/share/ca-certificates"
  if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
    cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
  fi
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  mkdir -p "$root/root/.cargo/registry" "$root$ORIGIN_IN_ROOT"
  cp "$SELF" "$root$STAGE_IN_ROOT"
  say "unpacked a fresh copy in $(($(date +%s) - t1)) s ($root)"

  # Its own process group, so a signal here reaches everything inside through one kill.
  set -m
  unshare --mount --pid --fork --kill-child --propagation private -- \
    "$SELF" --enter "$root" "$repo" "$cache" </dev/null &
  NS_PID=$!
  set +m
  trap 'cancel' INT TERM HUP
  local rc=0
  while :; do
    wait "$NS_PID" && rc=0 || rc=$?
    # wait returns >128 when a trapped signal interrupted it; the namespace may still be running.
    kill -0 "$NS_PID" 2>/dev/null || break
  done
  NS_PID=
  say "total $(($(date +%s) - t0)) s"
  return "$rc"
}

CANCELS=0
cancel() {
  CANCELS=$((CANCELS + 1))
  [ -n "${NS_PID:-}" ] || exit 130
  if [ "$CANCELS" -eq 1 ]; then
    say "cancelling the run inside (again to kill it at once)"
    kill -INT -- "-$NS_PID" 2>/dev/null || true
  else
    kill -KILL "$NS_PID" 2>/dev/null || true   # --kill-child takes the PID namespace with it
  fi
}

teardown() {
  local rc=$?
  if [ -n "${NS_PID:-}" ] && kill -0 "$NS_PID" 2>/dev/null; then
    kill -KILL "$NS_PID" 2>/dev/null || true
    wait "$NS_PID" 2>/dev/null || true
  fi
  [ -n "${BUILD:-}" ] && rm -rf "$BUILD"   # a debootstrap cut short: its namespace took its mounts
  if [ -n "${WORK:-}" ] && [ -d "$WORK" ]; then
    # The mounts lived in the namespace only; never delete through one that shows here.
    if findmnt -rn -o TARGET | grep -q "^$WORK/"; then
      echo "test-fresh: mounts remain under $WORK; not removing it" >&2
    elif [ "${CATNIP_FRESH_KEEP:-0}" = 1 ]; then
      say "kept $WORK (CATNIP_FRESH_KEEP=1)"
    else
      rm -rf "$WORK"
    fi
  fi
  exit "$rc"
}

case "${1:-}" in
  --in-root) in_root ;;
  --verdict) verdict "$2" ;;   # inside a kept root (CATNIP_FRESH_KEEP=1), from the clone: the check alone
  --enter) shift; enter "$@" ;;
  "") trap teardown EXIT; outside ;;
  *) die "unknown option $1 (it takes none)" ;;
esac
