#!/usr/bin/env bash
# Every test: the engine's Rust tests, then the Python suite (unit, namespace and emulation tests).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo test --release --quiet --manifest-path engine/Cargo.toml
.venv/bin/catnip clean >/dev/null
status=0
.venv/bin/python -m pytest -q -rs "$@" || status=$?
# Leave no state behind, even when a test failed half-way.
.venv/bin/catnip clean >/dev/null || status=1
exit $status
