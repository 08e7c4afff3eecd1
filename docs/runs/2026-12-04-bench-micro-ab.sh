#!/bin/bash
# A/B of the runtime microbenchmarks. BEFORE and AFTER each name a folder
# with bin/spotlight and lib/libspotlight_runtime.so.
cd /tmp/ab
for round in 1 2 3; do
  for v in before after; do
    echo "== $v round $round micro"
    d=$([ $v = before ] && echo "$BEFORE" || echo "$AFTER")
    LD_LIBRARY_PATH=$d/lib $d/bin/spotlight bench --json 2>/dev/null | tail -1
  done
done
