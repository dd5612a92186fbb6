#!/usr/bin/env bash
# Overhead of measuring a command: bare vs `amdahl run` vs `codecarbon monitor`, side by side.
#
# The workload burns 3 s of CPU time (bounded by process CPU time, so contention stretches its
# wall time but not its work); a second workload, `sleep 3`, isolates the tool's own start/stop
# wall cost from CPU contention on a busy machine. Variants run interleaved (bare, amdahl,
# codecarbon, bare, ...) REPS times so load drift hits all alike; we report medians of
#   wall    wall-clock seconds of the whole invocation,
#   cpu     user+system CPU seconds of the invocation and everything it started (wait4 rusage),
#   rss     peak resident set of the measuring tool's own process (VmHWM, polled), or of the
#           workload itself for the bare run,
# and the extra wall/CPU of each tool over the bare median. Targets for amdahl at a 1 s
# interval: < 20 ms extra wall, < 1 % extra CPU, < 15 MB RSS.
#
# Usage: scripts/bench/run_overhead.sh [REPS]   (env: AMDAHL_BIN, VENV, INTERVAL)
set -euo pipefail
REPS=${1:-5}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${VENV:-/tmp/amdahl-bench-venv}
INTERVAL=${INTERVAL:-1s}
AMDAHL_BIN=${AMDAHL_BIN:-$ROOT/target/release/amdahl}

if [ ! -x "$AMDAHL_BIN" ]; then
  (cd "$ROOT" && cargo build --release -p amdahl-cli)
fi
if [ ! -x "$VENV/bin/codecarbon" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q codecarbon
fi
CC_VERSION=$("$VENV/bin/python" -c 'import codecarbon; print(codecarbon.__version__)')
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/busy.py" <<'PY'
import time
end = time.process_time() + 3.0
x = 0
while time.process_time() < end:
    x += 1
PY

python3 - "$REPS" "$WORK" "$AMDAHL_BIN" "$VENV/bin/codecarbon" "$INTERVAL" "$CC_VERSION" <<'PY'
import os, resource, statistics, subprocess, sys, threading, time
reps, work, amdahl, codecarbon, interval, cc_version = sys.argv[1:7]
reps = int(reps)
def variants(work_cmd):
    return [
        ("bare", work_cmd),
        (f"amdahl run (interval {interval})", [amdahl, "run", "--interval", interval, "--", *work_cmd]),
        (f"codecarbon {cc_version} monitor --offline", [codecarbon, "monitor", "--offline", "--country-iso-code", "FRA", "--", *work_cmd]),
    ]
workloads = [("3 s of CPU (python busy loop)", ["python3", os.path.join(work, "busy.py")]), ("sleep 3", ["sleep", "3"])]

def hwm_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0

def once(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Poll the peak RSS on a thread so the wall time is taken the moment wait() returns.
    peak = [0]
    def poll():
        while p.returncode is None:
            peak[0] = max(peak[0], hwm_kb(p.pid))
            time.sleep(0.02)
    th = threading.Thread(target=poll, daemon=True)
    th.start()
    p.wait()
    wall = time.perf_counter() - t0
    th.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        sys.exit(f"{cmd[0]} exited {p.returncode}")
    return wall, cpu, peak[0] / 1024

for title, work_cmd in workloads:
    vs = variants(work_cmd)
    for _, cmd in vs:
        once(cmd)  # warm caches
    runs = {name: [] for name, _ in vs}
    for _ in range(reps):
        for name, cmd in vs:
            runs[name].append(once(cmd))
    rows = [(name, *(statistics.median(r[i] for r in runs[name]) for i in range(3)), min(r[0] for r in runs[name])) for name, _ in vs]
    bw, bc, bmin = rows[0][1], rows[0][2], rows[0][4]
    print(f"workload: {title}")
    print(f"  {'variant':42} {'wall s':>8} {'+wall ms':>9} {'+min wall ms':>13} {'cpu s':>7} {'+cpu s':>7} {'+cpu %':>7} {'RSS MB':>7}")
    for name, w, c, rss, wmin in rows:
        pct = f"{100*(c-bc)/bc:7.2f}" if bc > 0.05 else "      -"
        print(f"  {name:42} {w:8.3f} {1e3*(w-bw):9.1f} {1e3*(wmin-bmin):13.1f} {c:7.3f} {c-bc:7.3f} {pct} {rss:7.1f}")
print(f"(medians of {reps} runs, '+min wall' compares fastest runs; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
      "RSS: the tool's own process, bare: the workload's)")
PY
