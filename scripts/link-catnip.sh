#!/usr/bin/env bash
# Puts this clone's `catnip` on PATH: LINK (default /usr/local/bin/catnip) -> .venv/bin/catnip.
# A link into another clone is that machine's `catnip`: it is left alone, with a note how to
# repoint it (CATNIP_RELINK=1), never silently taken over by the clone that ran set-up last.
# A link whose clone is gone is repointed, saying so. Called by scripts/setup.sh.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
target="$repo/.venv/bin/catnip"
link="${1:-/usr/local/bin/catnip}"
say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

if [ -L "$link" ]; then
  current=$(readlink "$link")
  if [ -e "$link" ] && [ "$(readlink -f "$link")" = "$(readlink -f "$target")" ]; then
    exit 0  # already this clone's
  fi
  if [ -e "$link" ] && [ "${CATNIP_RELINK:-0}" != 1 ]; then
    say "note: $link is $current (another clone), left as it is; CATNIP_RELINK=1 make setup points it here"
    exit 0
  fi
  why=$([ -e "$link" ] && echo "CATNIP_RELINK=1" || echo "its target is gone")
  ln -sfn "$target" "$link"
  say "$link now points to $target (was $current: $why)"
elif [ -e "$link" ]; then
  say "note: $link is not a link (another install?), left as it is; this clone's catnip is $target"
else
  ln -s "$target" "$link"
  say "linked $link -> $target"
fi
