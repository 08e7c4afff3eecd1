#!/bin/bash
# A/B of two builds of `spotlight`, alternating, three rounds each; each run's
# last line (its JSON) is logged. BEFORE = the older build (here the build of
# 38ea4db: turn budget, liveness forgiveness), AFTER = this checkout (done_of
# finished-call lists, remove_pool by index, errors after the commit, no
# heartbeat spin). ARGS = the bench to run (default: the microbenchmarks).
set -e
BEFORE=${BEFORE:-/tmp/before/build/bin/spotlight}
AFTER=${AFTER:-$(cd "$(dirname "$0")/../.." && pwd)/build/bin/spotlight}
ARGS=${ARGS:-bench --json}
date -u
for round in 1 2 3; do
  for which in before after; do
    bin=$BEFORE; [ "$which" = after ] && bin=$AFTER
    echo "--- round $round $which"
    # shellcheck disable=SC2086  # ARGS is a word list
    "$bin" $ARGS | tail -1
  done
done
date -u
