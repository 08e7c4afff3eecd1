#!/usr/bin/env bash
# The build before the caller pumps its own socket (BEFORE, e.g. a worktree
# of a31dc93 built with tools/run build) against this one, alternating, four
# rounds of the default `spotlight bench --json`. Run from the repository root.
set -u
BEFORE=${1:?usage: $0 BEFORE_BIN_DIR}
for round in 1 2 3 4; do
  for b in "$BEFORE" build/bin; do
    printf "round %s %s " "$round" "$b"
    timeout 300 "$b/spotlight" bench --json 2>/dev/null | tail -1
  done
done
