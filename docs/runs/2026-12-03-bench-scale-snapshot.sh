#!/bin/bash
# A/B of the snapshot taken over several turns, with turns of at most 1 MiB of
# frames: BEFORE = the build of 66d2af3 (the whole snapshot in the cut's
# turn, 4 MiB turns), AFTER = this checkout. The queued
# phase of the scale bench (a million calls accepted, the head killed and
# restarted on its store, then run), alternating, three rounds each.
ARGS="bench scale --actors 0 --pools 0 --json" \
  exec "$(dirname "$0")/2026-12-03-bench-ab.sh"
