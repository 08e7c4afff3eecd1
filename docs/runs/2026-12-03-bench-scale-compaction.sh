#!/bin/bash
# A/B of 221b1fe (compactions write only the pools, actors and clients that
# changed): BEFORE = the build of 8f2948f, AFTER = this checkout. Synchronous
# calls alone and beside 10,000 idle actors, 20,000 calls each (at 5,000 the
# one compaction that writes the 10,000 new actors falls in the window or
# not, by chance), alternating, three rounds each.
set -e
BEFORE=${BEFORE:-/tmp/before/build/bin/spotlight}
AFTER=${AFTER:-$(cd "$(dirname "$0")/../.." && pwd)/build/bin/spotlight}
date -u
for round in 1 2 3; do
  for which in before after; do
    bin=$BEFORE; [ "$which" = after ] && bin=$AFTER
    echo "--- round $round $which"
    "$bin" bench scale --pools 0 --queued 0 --sync-calls 20000 --json | tail -1
  done
done
date -u
