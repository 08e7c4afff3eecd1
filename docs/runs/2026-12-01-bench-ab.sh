#!/bin/bash
# A/B of the runtime bench: the build before this session's change (old) and after (new),
# unpinned and pinned to one CPU, interleaved. "old" is commit 9f754ef built in a
# worktree (git worktree add /work/old 9f754ef; cmake ... --target spotlight).
for r in 1 2 3; do
  for pin in none 0; do
    for b in /work/old/build/bin /work/main/build/bin; do
      if [ $pin = none ]; then pre=""; else pre="taskset -c 0"; fi
      out=$($pre timeout 300 $b/spotlight bench --json 2>&1 | tail -1)
      echo "run=$r pin=$pin build=$b $out"
    done
  done
done
