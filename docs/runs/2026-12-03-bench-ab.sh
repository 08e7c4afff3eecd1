#!/bin/bash
# A/B of this session's head changes on the default microbenchmarks:
# BEFORE = the build of 38ea4db (turn budget, liveness forgiveness), AFTER =
# this checkout (done_of finished-call lists, remove_pool by index, errors
# after the commit, no heartbeat spin), alternating, three rounds each.
set -e
BEFORE=${BEFORE:-/tmp/before/build/bin/spotlight}
AFTER=${AFTER:-$(cd "$(dirname "$0")/../.." && pwd)/build/bin/spotlight}
date -u
for round in 1 2 3; do
  for which in before after; do
    bin=$BEFORE; [ "$which" = after ] && bin=$AFTER
    echo "--- round $round $which"
    "$bin" bench --json | tail -1
  done
done
date -u
