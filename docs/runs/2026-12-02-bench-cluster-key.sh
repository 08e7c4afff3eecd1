#!/usr/bin/env bash
# The cost of the cluster key (CURVE on every runtime socket). Three variants,
# alternating, ROUNDS rounds of `spotlight bench --json`: OLD, the build before
# it (4d5a937, no CURVE); NEW with --insecure (the same code paths, no CURVE);
# NEW as shipped (CURVE with a cluster key). Each DIR holds bin/spotlight and
# lib/libspotlight_runtime.so copied out of a build of that commit.
# Run from the repository root:
#   docs/runs/2026-12-02-bench-cluster-key.sh OLD_DIR NEW_DIR [ROUNDS]
set -u
OLD=${1:?usage: $0 OLD_DIR NEW_DIR [ROUNDS]}
NEW=${2:?usage: $0 OLD_DIR NEW_DIR [ROUNDS]}
ROUNDS=${3:-6}
run() {  # label dir args...
  local label=$1 d=$2
  shift 2
  out=$(LD_LIBRARY_PATH="$d/lib" timeout 300 "$d/bin/spotlight" bench --json "$@" 2>/dev/null)
  extra=$(printf "%s\n" "$out" | awk '/^(n_n_actor_calls_async_from_actors|zmq_roundtrips_curve|zmq_oneway_curve) / {printf "%s=%s ", $1, $2}')
  printf "round %s %-12s %s %s\n" "$round" "$label" "$(printf "%s\n" "$out" | tail -1)" "$extra"
}
for round in $(seq 1 "$ROUNDS"); do
  run old "$OLD"
  run insecure "$NEW" --insecure
  run curve "$NEW"
done
