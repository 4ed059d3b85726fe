#!/usr/bin/env bash
# One set-up for everything: this machine, CI, and (later) the Vagrant VM's provisioning.
# Idempotent: a second run only checks. Needs root (apt-get, namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."
RUST_MIN=1.82   # oldest rustc that builds engine/ (Option::is_none_or)

WITH_TEST_TOOLS=0
for arg in "$@"; do
  case "$arg" in
    --test) WITH_TEST_TOOLS=1 ;;   # also what the test suite needs: a browser, its driver, vagrant
    *) echo "setup: unknown option $arg (allowed: --test)" >&2; exit 2 ;;
  esac
done

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: must run as root (it installs Debian packages and uses network namespaces)" >&2
  exit 1
fi

# 1. Debian packages. Keep this list the single source of what the project needs from Debian.
PACKAGES=(
  mininet openvswitch-switch bridge-utils net-tools iproute2 iptables ethtool tcpdump iputils-ping iperf3
  apache2 apache2-dev
  clang llvm bpftool libbpf-dev pkg-config
  python3 python3-venv python3-pip
  build-essential curl ca-certificates git
  chromium
  openssh-server
)
# openssh-server: an imitated second machine runs its own sshd in a namespace (testbed/machines.py),
# and another machine of a split topology is reached by ssh (docs/cluster.md). Debian starts its ssh
# service where it can; the testbed leaves that service as Debian set it.
# chromium: kaleido draws the static figures (SVG/PDF/PNG) with it. Only for `make test`: the
# driver for the dashboard's headless browser tests, `vagrant validate`.
TEST_PACKAGES=(chromium-driver vagrant)
[ "$WITH_TEST_TOOLS" = 1 ] && PACKAGES+=("${TEST_PACKAGES[@]}")
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  say "Debian packages present"
fi
# The Debian apache2 package may have started the system service; the testbed never uses it
# and its port-80 listener in the root namespace is not ours to keep.
if command -v apache2ctl >/dev/null && pgrep -f '^/usr/sbin/apache2 -k start' >/dev/null 2>&1; then
  say "stopping the system apache2 service (the testbed runs its own instances)"
  apache2ctl -k stop >/dev/null 2>&1 || true
fi

# 2. Open vSwitch: running ovsdb-server and ovs-vswitchd (no systemd on some machines).
if ! ovs-vsctl --timeout=3 show >/dev/null 2>&1; then
  say "starting Open vSwitch"
  /usr/share/openvswitch/scripts/ovs-ctl start --system-id=random >/dev/null 2>&1 || \
    /usr/share/openvswitch/scripts/ovs-ctl start --system-id=random
fi

# 3. Python venv that sees Debian's Mininet (built for /usr/bin/python3).
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import mininet.net' 2>/dev/null; then
  say "creating .venv (with Debian's site-packages for Mininet)"
  rm -rf .venv
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
stamp=.venv/.catnip-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  say "installing the Python package and its dependencies"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[test]'
  touch "$stamp"
fi

# 4. Rust toolchain: the one on PATH if recent enough, else rustup (the Vagrant VM has internet).
export PATH="$HOME/.cargo/bin:$PATH"
rust_ok() {
  command -v cargo >/dev/null 2>&1 || return 1
  local v; v=$(rustc --version | awk '{print $2}')
  [ "$(printf '%s\n%s\n' "$RUST_MIN" "$v" | sort -V | head -n1)" = "$RUST_MIN" ]
}
if ! rust_ok; then
  say "installing a Rust toolchain with rustup"
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  export PATH="$HOME/.cargo/bin:$PATH"
fi
# The tests check the engine's formatting (cargo fmt --check); rustup's minimal profile lacks rustfmt.
if [ "$WITH_TEST_TOOLS" = 1 ] && ! cargo fmt --version >/dev/null 2>&1 && command -v rustup >/dev/null; then
  say "adding rustfmt (the tests check the engine's formatting)"
  rustup component add rustfmt
fi

# 5. The queue engine, release build.
say "building the queue engine ($(rustc --version))"
cargo build --release --quiet --manifest-path engine/Cargo.toml

# 6. The sender side of CATNIP: the SPM BPF object (compiled against this kernel's BTF) and mod_catnip.
say "building the BPF marker and mod_catnip"
make -s -C bpf
make -s -C apache

# 7. A `catnip` command on PATH for users who do not activate the venv; one that another clone
# put there is left to it, with a note (scripts/link-catnip.sh; CATNIP_RELINK=1 takes it over).
scripts/link-catnip.sh /usr/local/bin/catnip

say "done: $(.venv/bin/catnip check --brief 2>/dev/null || echo 'run `catnip check` for details')"
