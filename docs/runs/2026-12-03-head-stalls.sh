#!/bin/bash
# The million queued calls after bounding turns in bytes and reserving the
# compaction snapshot (9436318): three runs of the queued phase, then the
# default microbenchmarks once, nothing else running.
set -e
cd "$(dirname "$0")/../.."
date -u
for i in 1 2 3; do
  echo "--- queued phase, run $i"
  build/bin/spotlight bench scale --actors 0 --pools 0 --json
done
echo "--- spotlight bench"
build/bin/spotlight bench --json
date -u
