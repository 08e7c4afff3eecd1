#!/usr/bin/env bash
# CPU a head and one node use over 20 idle seconds, by SPOTLIGHT_SPIN_US.
set -u
spin=$1; d=$(mktemp -d)
SPOTLIGHT_SPIN_US=$spin build/bin/spotlight head --port 0 --bind 127.0.0.1 --store $d/h.db --port-file $d/port > $d/head.log 2>&1 &
h=$!
while [ ! -s $d/port ]; do sleep 0.05; done
SPOTLIGHT_SPIN_US=$spin build/bin/spotlight join 127.0.0.1:$(cat $d/port) --market spot --slots 2 > $d/node.log 2>&1 &
n=$!
sleep 2
t() { awk '{print $14+$15}' /proc/$1/stat; }
h0=$(t $h); n0=$(t $n); sleep 20; h1=$(t $h); n1=$(t $n)
echo "spin=$spin head $(( (h1-h0) )) ticks, node $(( (n1-n0) )) ticks over 20 s (100 ticks = 1 CPU-second)"
build/bin/spotlight stop --address 127.0.0.1:$(cat $d/port) > /dev/null 2>&1; wait; rm -rf $d
