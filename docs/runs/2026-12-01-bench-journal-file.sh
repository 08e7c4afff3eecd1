#!/usr/bin/env bash
# The build before the journal got its own file (BEFORE, e.g. a worktree of
# d3e66a0 built with tools/run build) against this one, alternating: five
# rounds of the default `spotlight bench --json`, then three rounds of a long
# run (2,000,000 pipelined calls per phase) watched by bench-long.py.
# Run from the repository root.
set -u
BEFORE=${1:?usage: $0 BEFORE_BIN_DIR}
here=$(dirname "$0")
for round in 1 2 3 4 5; do
  for b in "$BEFORE" build/bin; do
    printf "default round %s %s " "$round" "$b"
    timeout 300 "$b/spotlight" bench --json 2>/dev/null | tail -1
  done
done
for round in 1 2 3; do
  for b in "$BEFORE" build/bin; do
    printf "long round %s %s " "$round" "$b"
    timeout 600 python3 "$here/2026-12-01-bench-long.py" "$(cd "$b" && pwd)" 2000000
  done
done
