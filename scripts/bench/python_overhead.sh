#!/usr/bin/env bash
# Overhead of measuring inside a Python training loop: a loop of 10,000
# steps of fixed work, bare, under amdahl.Tracker with step() every iteration, and under
# CodeCarbon's OfflineEmissionsTracker, side by side in one run.
#
# The loop: 10,000 steps of 20,000 multiply-adds of pure Python each, about 1 ms per step on a
# 2020s core, so ~10 s bare. Why that long: a tracker's cost is mostly fixed (import, start,
# stop) plus a tiny per-step part, so "< 1 % extra wall" is only a meaningful question for a
# loop much longer than the fixed part (a 0.05 s fixed cost is 2.5 % of a 2 s loop and 0.5 % of
# a 10 s one); real training steps are longer still. The fixed costs are printed on their own
# too, so the overhead of any loop length can be read off.
#
# Each variant runs in a fresh interpreter, REPS times interleaved (load drift hits all alike);
# medians of
#   wall   seconds of the whole interpreter (import, start, loop, stop, exit),
#   cpu    user+system CPU seconds of it and every thread it started (wait4 rusage),
#   rss    its peak resident set (ru_maxrss of that one child),
# the extra of each tracker over the bare median, then (fresh interpreters, cold) the cost of
# `import amdahl`, of start() and stop(), and of one step() call (timeit, 10^6 calls).
# Targets: < 1 % extra wall, step() < 2 µs, < 10 MB extra RSS.
#
# Usage: scripts/bench/python_overhead.sh [REPS]   (default 3)
#   VENV     a venv with the amdahl wheel installed (default target/py-venv, from scripts/test;
#            for figures worth quoting install a release wheel: maturin build --release)
#   CC_VENV  a venv with codecarbon (default /tmp/amdahl-bench-venv; created with
#            `pip install codecarbon` when missing; CodeCarbon is skipped if that fails)
set -euo pipefail
REPS=${1:-3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${VENV:-$ROOT/target/py-venv}
CC_VENV=${CC_VENV:-/tmp/amdahl-bench-venv}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import amdahl' 2>/dev/null; then
  echo "no venv with the amdahl wheel at $VENV: run scripts/test python first (or set VENV)" >&2
  exit 1
fi
CCPY=""
if [ -x "$CC_VENV/bin/python" ] && "$CC_VENV/bin/python" -c 'import codecarbon' 2>/dev/null; then
  CCPY="$CC_VENV/bin/python"
elif python3 -m venv "$CC_VENV" && "$CC_VENV/bin/pip" install -q codecarbon; then
  CCPY="$CC_VENV/bin/python"
else
  echo "codecarbon could not be installed into $CC_VENV: comparing bare and amdahl only" >&2
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/loop.py" <<'PY'
import sys
variant, out = sys.argv[1], sys.argv[2]
STEPS, MULADDS = 10_000, 20_000

def work():
    # The fixed work of one step: about 1 ms of pure Python on a 2020s core.
    s = 0
    for i in range(MULADDS):
        s += i * i
    return s

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
    from codecarbon import OfflineEmissionsTracker
    t = OfflineEmissionsTracker(country_iso_code="FRA", output_dir=out, log_level="error")
    t.start()
    for _ in range(STEPS):
        work()
    t.stop()
PY
cat > "$WORK/fixed.py" <<'PY'
# The fixed costs, cold (a fresh interpreter): import, start(), stop(); and one step().
import resource, sys, time, timeit
out = sys.argv[1]
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
r0, t0 = rss(), time.perf_counter()
import amdahl
t1 = time.perf_counter()
r1 = rss()
t = amdahl.Tracker(region="FR", output=f"{out}/fixed.json", interval=1.0)
t2 = time.perf_counter()
t.start()
t3 = time.perf_counter()
r2 = rss()
N = 1_000_000
step = min(timeit.repeat(t.step, number=N, repeat=5)) / N
t4 = time.perf_counter()
t.stop()
t5 = time.perf_counter()
class Noop:
    def step(self, n=1):
        return n
noop = min(timeit.repeat(Noop().step, number=N, repeat=5)) / N
print(f"{t1 - t0} {t3 - t2} {t5 - t4} {step} {noop} {r1 - r0} {r2 - r1} {rss() - r0}")
PY

python3 - "$REPS" "$WORK" "$VENV/bin/python" "$CCPY" <<'PY'
import os, resource, statistics, subprocess, sys, time
reps, work, py, ccpy = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
variants = [("bare", py), ("amdahl", py)] + ([("codecarbon", ccpy)] if ccpy else [])
ver = lambda p, mod: subprocess.run([p, "-c", f"import importlib.metadata as m; print(m.version('{mod}'))"], capture_output=True, text=True).stdout.strip()
names = {"bare": "bare loop", "amdahl": f"amdahl {ver(py, 'amdahl')} Tracker + step() (1 s interval)",
         "codecarbon": f"codecarbon {ver(ccpy, 'codecarbon') if ccpy else ''} OfflineEmissionsTracker"}

# One child per measurement, started from a throw-away wrapper, so RUSAGE_CHILDREN holds that
# child alone (its ru_maxrss is its own peak, not the largest of all children so far).
WRAP = ("import resource, subprocess, sys, time; t = time.perf_counter();"
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL);"
        "w = time.perf_counter() - t; r = resource.getrusage(resource.RUSAGE_CHILDREN);"
        "print(w, r.ru_utime + r.ru_stime, r.ru_maxrss / 1024)")

def once(v, python):
    out = subprocess.run([sys.executable, "-c", WRAP, python, os.path.join(work, "loop.py"), v, work],
                         capture_output=True, text=True, check=True).stdout.split()
    return tuple(map(float, out))

res = {v: [] for v, _ in variants}
for _ in range(reps):
    for v, python in variants:
        res[v].append(once(v, python))
med = {v: [statistics.median(x[i] for x in xs) for i in range(3)] for v, xs in res.items()}
bw, bc, br = med["bare"]
load = os.getloadavg()[0]
print(f"10,000 steps of fixed work (20,000 Python multiply-adds each); {reps} interleaved repetitions, "
      f"medians; {os.cpu_count()} CPUs, load average {load:.1f} at the end")
print(f"{'variant':52} {'wall s':>8} {'cpu s':>8} {'rss MB':>7} {'+wall s':>8} {'+wall':>8} {'+cpu s':>8} {'+rss MB':>8}")
for v, _ in variants:
    w, c, r = med[v]
    extra = "" if v == "bare" else f" {w - bw:+8.3f} {(w - bw) / bw * 100:+7.2f}% {c - bc:+8.3f} {r - br:+8.1f}"
    print(f"{names[v]:52} {w:8.3f} {c:8.3f} {r:7.1f}{extra}")

fixed = [list(map(float, subprocess.run([py, os.path.join(work, "fixed.py"), work], capture_output=True,
                                         text=True, check=True).stdout.split())) for _ in range(reps)]
imp, start, stop, step, noop, rimp, rstart, rall = (statistics.median(f[i] for f in fixed) for i in range(8))
print(f"amdahl fixed costs (fresh interpreter, medians of {reps}): import {imp * 1e3:.1f} ms (+{rimp:.1f} MB), "
      f"start() {start * 1e3:.1f} ms (+{rstart:.1f} MB), stop() {stop * 1e3:.1f} ms; "
      f"together {(imp + start + stop) * 1e3:.0f} ms, which is 1 % of a {(imp + start + stop) * 100:.1f} s loop")
print(f"Tracker.step(): {step * 1e9:.0f} ns per call (a no-op Python method: {noop * 1e9:.0f} ns)")
# What the tracker adds to the script's own thread: the fixed costs plus 10,000 step() calls.
# On a loaded machine this is the robust figure; the sampler thread's CPU is in "+cpu s".
own = imp + start + stop + 10_000 * step
print(f"amdahl on the script's thread: {own * 1e3:.0f} ms = {own / bc * 100:.2f} % of the bare loop's "
      f"{bc:.2f} CPU s")
w, c, r = med["amdahl"]
ok = lambda b: "met" if b else "NOT met"
busy = load > (os.cpu_count() or 1)
print(f"targets: extra wall {(w - bw) / bw * 100:+.2f} % < 1 %: {ok((w - bw) / bw < 0.01)}"
      + (f" (load {load:.1f} > {os.cpu_count()} CPUs: wall times are not comparable; "
         f"on the script's thread {own / bc * 100:.2f} %: {ok(own / bc < 0.01)})" if busy else "")
      + f"; step() {step * 1e9:.0f} ns < 2 µs: {ok(step < 2e-6)}; extra RSS {r - br:+.1f} MB < 10 MB: {ok(r - br < 10)}")
PY
