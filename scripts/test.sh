#!/usr/bin/env bash
# Every test: the linters (rustfmt, ruff's pyflakes rules), the engine's Rust tests, then the
# Python suite (unit, namespace and emulation tests). With CI=true a skip for anything but a
# missing kernel feature fails the run (tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
# The suite builds and tears down namespaces: never start it while an experiment holds the machine lock.
if holder=$(.venv/bin/python -c 'from testbed import cleanup; h = cleanup.run_in_progress(); print(h or ""); exit(1 if h else 0)'); then :; else
    echo "scripts/test.sh: a catnip run holds the machine lock ($holder); not testing now (it would wreck that run)." >&2
    exit 1
fi
# rustup's minimal profile (scripts/setup.sh) has no rustfmt: add it where rustup manages the toolchain.
if ! cargo fmt --version >/dev/null 2>&1; then
    command -v rustup >/dev/null && rustup component add rustfmt \
        || { echo "scripts/test.sh: no rustfmt (rustup component add rustfmt, or apt-get install rustfmt)" >&2; exit 1; }
fi
cargo fmt --manifest-path engine/Cargo.toml --check
.venv/bin/ruff check --quiet .
cargo test --release --quiet --manifest-path engine/Cargo.toml
.venv/bin/catnip clean >/dev/null
status=0
.venv/bin/python -m pytest -q -rs --durations=25 "$@" || status=$?
# Leave no state behind, even when a test failed half-way (clean refuses if a run started meanwhile).
.venv/bin/catnip clean >/dev/null || status=1
exit $status
