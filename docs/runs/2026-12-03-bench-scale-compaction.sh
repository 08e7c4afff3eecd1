#!/bin/bash
# A/B of 221b1fe (compactions write only the pools, actors and clients that
# changed): BEFORE = the build of 8f2948f (at /tmp/before), AFTER = this
# checkout. Synchronous calls alone and beside 10,000 idle actors, 20,000
# calls each (at 5,000 the one compaction that writes the 10,000 new actors
# falls in the window or not, by chance), alternating, three rounds each.
ARGS="bench scale --pools 0 --queued 0 --sync-calls 20000 --json" \
  exec "$(dirname "$0")/2026-12-03-bench-ab.sh"
