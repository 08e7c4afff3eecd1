#!/bin/bash
# A/B: the head's intake budget and 256 KiB call frames against the build before.
# before/ and after/ each hold bin/spotlight and lib/libspotlight_runtime.so of one build.
cd /tmp/ab
for round in 1 2 3 4; do
  for v in before after; do
    echo "== $v round $round scale"
    LD_LIBRARY_PATH=/tmp/ab/$v/lib /tmp/ab/$v/bin/spotlight bench scale --actors 0 --pools 0 --sync-calls 2000 --json 2>/dev/null | tail -1
  done
done
for round in 1 2 3; do
  for v in before after; do
    echo "== $v round $round micro"
    LD_LIBRARY_PATH=/tmp/ab/$v/lib /tmp/ab/$v/bin/spotlight bench --json 2>/dev/null | tail -1
  done
done
