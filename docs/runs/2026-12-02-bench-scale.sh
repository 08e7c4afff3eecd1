#!/usr/bin/env bash
# Two builds' `spotlight bench scale --json` (10,000 actors, 1,000 create/call/remove
# cycles, 1,000,000 queued calls), alternating, ROUNDS rounds. Here BEFORE was
# c08c0b9 with only the benchmark added (tools/ of the commit after it), and AFTER
# the commit with the head's work indexes. Each DIR is a build folder (DIR/bin/spotlight).
# Run from the repository root: docs/runs/2026-12-02-bench-scale.sh BEFORE AFTER [ROUNDS]
set -u
BEFORE=${1:?usage: $0 BEFORE_DIR AFTER_DIR [ROUNDS]}
AFTER=${2:?usage: $0 BEFORE_DIR AFTER_DIR [ROUNDS]}
ROUNDS=${3:-3}
for round in $(seq 1 "$ROUNDS"); do
  for d in "$BEFORE" "$AFTER"; do
    out=$(timeout 600 "$d/bin/spotlight" bench scale --json 2>/dev/null)
    printf "round %s %s %s\n" "$round" "$d" "$(printf "%s\n" "$out" | tail -1)"
  done
done
