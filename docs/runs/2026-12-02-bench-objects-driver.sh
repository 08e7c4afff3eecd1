#!/usr/bin/env bash
# `spotlight bench objects --json` (256 MiB, three rounds per run, medians),
# keyed (CURVE, as shipped) and --insecure, alternating, ROUNDS rounds. Since
# 9f05ec1 it also times a driver's put and both copies between a driver and a
# node (Runtime::objects()), and reports the CURVE bulk ceiling when keyed.
# Run from the repository root: docs/runs/2026-12-02-bench-objects-driver.sh [ROUNDS]
set -u
ROUNDS=${1:-3}
for round in $(seq 1 "$ROUNDS"); do
  for mode in keyed insecure; do
    flag=""
    [ "$mode" = insecure ] && flag="--insecure"
    printf "round %s %s " "$round" "$mode"
    timeout 300 build/bin/spotlight bench objects --json $flag 2>/dev/null | tail -1
  done
done
