#!/usr/bin/env python3
"""One long `spotlight bench` (N pipelined calls per phase, so compactions
happen inside the measured phases), watched from outside:
  - CPU microseconds per call of the bench (client), head and node processes,
    from /proc, from the cluster's start to the end of the last phase;
  - the head's longest pause: `spotlight status` is asked every 0.2 s and the
    slowest answer before the last phase ends is kept (the head answers after
    its turn's commit, so a compaction shows here);
  - how often the node took the head for gone and said hello again (head.log).
Usage: bench-long.py BIN_DIR [N]; prints one JSON line."""
import glob, json, os, subprocess, sys, threading, time

bin_dir = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000000
spotlight = os.path.join(bin_dir, "spotlight")
hz = os.sysconf("SC_CLK_TCK")
before = set(glob.glob("/tmp/spotlight-cluster-*"))
bench = subprocess.Popen([spotlight, "bench", "--sync-calls", "100", "--async-calls", str(n), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
lines = []
reader = threading.Thread(target=lambda: lines.extend(bench.stdout), daemon=True)
reader.start()

def cpu_s(pid):
    try:
        f = open(f"/proc/{pid}/stat").read()
        f = f[f.rfind(")") + 2:].split()
        return (int(f[11]) + int(f[12])) / hz
    except OSError:
        return None

def children():
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline").read().split("\0")
        except OSError:
            continue
        if len(cmd) > 1 and cmd[0] == spotlight and cmd[1] in ("head", "join"):
            out[cmd[1]] = int(pid)
    return out

bench_at_start, last, slowest, log, next_probe = None, {}, 0.0, "", 0.0
while not any(l.startswith("n_n_actor_calls_async") for l in lines) and bench.poll() is None:
    kids = children()
    if kids and bench_at_start is None:
        bench_at_start = cpu_s(bench.pid)
    for role, pid in kids.items():
        if (c := cpu_s(pid)) is not None:
            last[role] = c
    if (c := cpu_s(bench.pid)) is not None:
        last["bench"] = c
    dirs = [d for d in glob.glob("/tmp/spotlight-cluster-*") if d not in before]
    if dirs:
        try:
            log = open(os.path.join(dirs[0], "head.log")).read()
            port = open(os.path.join(dirs[0], "head.port")).read().strip()
        except OSError:
            port = ""
        if port and time.time() >= next_probe:
            t0 = time.time()
            subprocess.run([spotlight, "status", "--address", "127.0.0.1:" + port],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
            # A probe still waiting when the last phase ends may meet the
            # cluster's stop: that one does not count.
            if not any(l.startswith("n_n_actor_calls_async") for l in lines):
                slowest = max(slowest, time.time() - t0)
            next_probe = time.time() + 0.2
    time.sleep(0.05)
bench.wait()
reader.join()
figures = json.loads(lines[-1])
calls = 2 * n  # the 1:1 phase and the n:n phase
per_call = {k: round(1e6 * (v - (bench_at_start if k == "bench" else 0)) / calls, 2) for k, v in last.items()}
per_call["total"] = round(sum(per_call.values()), 2)
print(json.dumps({"cpu_us_per_call": per_call, "slowest_status_s": round(slowest, 3),
                  "node_hello_again": log.count("said hello again"),
                  "1_1_actor_calls_async": figures["1_1_actor_calls_async"],
                  "n_n_actor_calls_async": figures["n_n_actor_calls_async"]}))
