#!/usr/bin/env bash
# Overhead of measuring inside a Python training loop: a loop of 10,000 steps of fixed work,
# bare, under amdahl.Tracker with step() every iteration, and under CodeCarbon's
# OfflineEmissionsTracker, side by side (issue 12, Benchmark).
#
# Each variant is a fresh interpreter (so peak RSS is its own), run interleaved REPS times so
# load drift hits all alike; we report medians of
#   wall   wall-clock seconds of the whole interpreter (import, start, loop, stop, exit),
#   cpu    user+system CPU seconds of it and everything it started (wait4 rusage),
#   rss    its peak resident set (ru_maxrss),
# the extra of each tracker over the bare median, and the cost of one Tracker.step() call
# (timeit, 10^6 calls, minus the same loop calling a no-op Python method... reported both).
# Targets for amdahl: < 1 % extra wall, step() < 2 µs, < 10 MB extra RSS.
#
# Usage: scripts/bench/python_overhead.sh [REPS]   (env: VENV: a venv with the amdahl wheel
# installed, default target/py-venv from scripts/test; CC_VENV: one with codecarbon)
set -euo pipefail
REPS=${1:-5}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${VENV:-$ROOT/target/py-venv}
CC_VENV=${CC_VENV:-/tmp/amdahl-bench-venv}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import amdahl' 2>/dev/null; then
  echo "no venv with the amdahl wheel at $VENV: run scripts/test python first (or set VENV)" >&2
  exit 1
fi
if [ ! -x "$CC_VENV/bin/python" ] || ! "$CC_VENV/bin/python" -c 'import codecarbon' 2>/dev/null; then
  python3 -m venv "$CC_VENV"
  "$CC_VENV/bin/pip" install -q codecarbon
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/loop.py" <<'PY'
import sys, time
variant, out = sys.argv[1], sys.argv[2]

def work():
    # Fixed work per step: ~0.2-0.3 ms of pure Python on a 2020s core.
    s = 0
    for i in range(2000):
        s += i * i
    return s

STEPS = 10_000
if variant == "bare":
    for _ in range(STEPS):
        work()
elif variant == "amdahl":
    import amdahl
    with amdahl.Tracker(region="FR", output=f"{out}/amdahl.json", interval=1.0) as t:
        for _ in range(STEPS):
            work()
            t.step()
elif variant == "codecarbon":
    import logging
    from codecarbon import OfflineEmissionsTracker
    t = OfflineEmissionsTracker(country_iso_code="FRA", output_dir=out, log_level="error")
    t.start()
    for _ in range(STEPS):
        work()
    t.stop()
PY
cat > "$WORK/step.py" <<'PY'
import timeit, amdahl
class Noop:
    def step(self, n=1):
        return n
N = 1_000_000
with amdahl.Tracker(interval=1.0) as t:
    step = min(timeit.repeat(t.step, number=N, repeat=5)) / N
noop = min(timeit.repeat(Noop().step, number=N, repeat=5)) / N
print(f"Tracker.step(): {step * 1e9:.0f} ns per call (a no-op Python method: {noop * 1e9:.0f} ns)")
PY

python3 - "$REPS" "$WORK" "$VENV/bin/python" "$CC_VENV/bin/python" <<'PY'
import os, resource, statistics, subprocess, sys, time
reps, work, py, ccpy = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
cc_version = subprocess.run([ccpy, "-c", "import codecarbon; print(codecarbon.__version__)"], capture_output=True, text=True).stdout.strip()
variants = [("bare", py), ("amdahl", py), ("codecarbon", ccpy)]
names = {"bare": "bare loop", "amdahl": "amdahl.Tracker + step() (interval 1 s)", "codecarbon": f"codecarbon {cc_version} OfflineEmissionsTracker"}

def once(v, python):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([python, os.path.join(work, "loop.py"), v, work], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    # ru_maxrss of children is the largest child so far: measure each variant's peak in a
    # throw-away process tree instead.
    return wall, cpu

def peak_rss(v, python):
    code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL);"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code, python, os.path.join(work, "loop.py"), v, work], capture_output=True, text=True, check=True)
    return int(out.stdout) / 1024  # KiB -> MiB

res = {v: [] for v, _ in variants}
for _ in range(reps):
    for v, python in variants:
        res[v].append(once(v, python))
rss = {v: peak_rss(v, python) for v, python in variants}
med = {v: (statistics.median(w for w, _ in xs), statistics.median(c for _, c in xs)) for v, xs in res.items()}
bw, bc = med["bare"]
print(f"10,000 steps of fixed work, {reps} interleaved repetitions, medians; {os.cpu_count()} CPUs")
print(f"{'variant':48} {'wall s':>8} {'cpu s':>8} {'rss MB':>8} {'+wall':>9} {'+cpu':>9} {'+rss MB':>8}")
for v, _ in variants:
    w, c = med[v]
    print(f"{names[v]:48} {w:8.3f} {c:8.3f} {rss[v]:8.1f} {w - bw:+9.3f} {c - bc:+9.3f} {rss[v] - rss['bare']:+8.1f}"
          + ("" if v == "bare" else f"   ({(w - bw) / bw * 100:+.1f} % wall)"))
PY
"$VENV/bin/python" "$WORK/step.py"
