#!/usr/bin/env bash
# Two builds, each a `spotlight` binary in DIR/bin with its runtime library in
# DIR/lib (copied out of build/ at each commit), alternating: five rounds of
# the default `spotlight bench --json`. Here BEFORE was fe19a62 and AFTER
# fd9c6b2 (nodes keep results until the head acknowledges them).
# Run from the repository root: docs/runs/2026-12-02-bench-result-acks.sh BEFORE AFTER
set -u
BEFORE=${1:?usage: $0 BEFORE_DIR AFTER_DIR}
AFTER=${2:?usage: $0 BEFORE_DIR AFTER_DIR}
for round in 1 2 3 4 5; do
  for d in "$BEFORE" "$AFTER"; do
    printf "round %s %s " "$round" "$d"
    LD_LIBRARY_PATH="$d/lib" timeout 300 "$d/bin/spotlight" bench --json 2>/dev/null | tail -1
  done
done
