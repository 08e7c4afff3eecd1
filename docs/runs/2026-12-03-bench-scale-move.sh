#!/bin/bash
# A/B of State::apply_accept taking its record by value (moved in at intake
# and at a restart's load, not copied): BEFORE = the build of aa11fdb,
# AFTER = this checkout. The queued phase of the scale bench, alternating,
# three rounds each (run twice).
ARGS="bench scale --actors 0 --pools 0 --json" \
  exec "$(dirname "$0")/2026-12-03-bench-ab.sh"
