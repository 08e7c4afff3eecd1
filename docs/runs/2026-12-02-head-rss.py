#!/usr/bin/env python3
# Samples the head's resident memory every 50 ms while `build/bin/spotlight
# bench` runs, and prints the timeline (every 8th sample) and the peak.
# Run from the repository root: python3 docs/runs/2026-12-02-head-rss.py
import os, re, subprocess, time

bench = subprocess.Popen(["build/bin/spotlight", "bench"], stdout=subprocess.PIPE, text=True)
t0 = time.time()

def head_pid():
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cmd = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if len(cmd) > 1 and cmd[0].endswith(b"spotlight") and cmd[1] == b"head":
            return p
    return None

pid = None
while pid is None and time.time() - t0 < 20:
    pid = head_pid()
    time.sleep(0.05)
samples = []
while True:
    try:
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        break
    samples.append((time.time() - t0, int(re.search(r"VmRSS:\s+(\d+)", status).group(1))))
    time.sleep(0.05)
print(bench.communicate()[0], end="")
for t, kib in samples[::8]:
    print(f"{t:5.2f} s {kib / 1024:7.1f} MiB")
print(f"peak {max(k for _, k in samples) / 1024:.1f} MiB")
