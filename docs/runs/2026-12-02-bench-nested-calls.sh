#!/usr/bin/env bash
# Two builds, each a `spotlight` binary in DIR/bin with its runtime library in
# DIR/lib (copied out of build/ at each commit), alternating: ROUNDS rounds of
# the default `spotlight bench --json`. Here BEFORE was 169bdf1 and AFTER
# 5f4b4e2 (calls from tasks: two more fields per call, protocol 5). AFTER
# also prints n_n_actor_calls_async_from_actors, which BEFORE lacks.
# Run from the repository root: docs/runs/2026-12-02-bench-nested-calls.sh BEFORE AFTER [ROUNDS]
set -u
BEFORE=${1:?usage: $0 BEFORE_DIR AFTER_DIR [ROUNDS]}
AFTER=${2:?usage: $0 BEFORE_DIR AFTER_DIR [ROUNDS]}
ROUNDS=${3:-8}
for round in $(seq 1 "$ROUNDS"); do
  for d in "$BEFORE" "$AFTER"; do
    out=$(LD_LIBRARY_PATH="$d/lib" timeout 300 "$d/bin/spotlight" bench --json 2>/dev/null)
    from_actors=$(printf "%s\n" "$out" | awk '/^n_n_actor_calls_async_from_actors/ {print $2}')
    printf "round %s %s %s from_actors=%s\n" "$round" "$d" "$(printf "%s\n" "$out" | tail -1)" "${from_actors:--}"
  done
done
