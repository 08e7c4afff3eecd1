#!/bin/bash
# A/B of a synchronous caller beside a flood of a million queued calls:
# before = b9a5908 with this session's bench scale, after = this session's build.
# BEFORE and AFTER each name a folder with bin/spotlight and lib/libspotlight_runtime.so.
cd /tmp/ab
for round in 1 2 3 4 5; do
  for v in before after; do
    echo "== $v round $round scale"
    d=$([ $v = before ] && echo "$BEFORE" || echo "$AFTER")
    LD_LIBRARY_PATH=$d/lib $d/bin/spotlight bench scale --actors 0 --pools 0 --sync-calls 1000 --json 2>/dev/null | tail -1
  done
done
