#!/usr/bin/env bash
# The latency mode against the default, alternating, three rounds, each once
# as it is and once on one CPU. Run from the repository root after tools/run build.
set -u
for round in 1 2 3; do
  for spin in 0 200; do
    echo "round $round SPOTLIGHT_SPIN_US=$spin"
    SPOTLIGHT_SPIN_US=$spin timeout 300 build/bin/spotlight bench --json | tail -1
    echo "round $round SPOTLIGHT_SPIN_US=$spin taskset -c 0"
    SPOTLIGHT_SPIN_US=$spin timeout 300 taskset -c 0 build/bin/spotlight bench --json | tail -1
  done
done
