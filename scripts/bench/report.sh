#!/usr/bin/env bash
# Benchmark of `amdahl report`: one page from 100 run results (one kind, side by side)
# plus a fit of 1,000 points. Prints the wall time (median of 5) and the size of the HTML. Target:
# well under 1 s and a few MB.
#
# Usage: scripts/bench/report.sh   (env: AMDAHL_BIN, default target/release/amdahl)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BIN=${AMDAHL_BIN:-target/release/amdahl}
[ -x "$BIN" ] || cargo build --quiet --release -p amdahl-cli
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

# One measured run on a fake powercap tree, copied 100 times with its energy varied (so each
# column differs), the way `amdahl run -o` writes them.
mkdir -p powercap/intel-rapl:0
printf 'package-0\n' > powercap/intel-rapl:0/name
printf '0\n' > powercap/intel-rapl:0/energy_uj
printf '262143328850\n' > powercap/intel-rapl:0/max_energy_range_uj
AMDAHL_POWERCAP_ROOT=$WORK/powercap "$BIN" --quiet run --no-gpu --interval 50ms -o run.json -- \
  sh -c "echo 42000000 > $WORK/powercap/intel-rapl:0/energy_uj"
python3 - <<'PY'
import json
r = json.load(open("run.json"))
for i in range(100):
    r["total_energy_j"] = 42.0 + i
    r["run_id"] = f"00000000-0000-4000-8000-{i:012d}"
    json.dump(r, open(f"run-{i:03d}.json", "w"), indent=2)
# 1,000 points of Amdahl's law with a serial fraction of 1 % and 1 % noise, N = 1..1000.
import random
random.seed(1)
with open("points.csv", "w") as f:
    f.write("n,time\n")
    for n in range(1, 1001):
        f.write(f"{n},{(0.01 + 0.99 / n) * 100 * (1 + random.uniform(-0.01, 0.01)):.6f}\n")
PY
"$BIN" fit points.csv --json > fit.json

echo "amdahl report: 100 run results + a 1,000-point fit ($BIN)"
for i in 1 2 3 4 5; do
  s=$(date +%s.%N)
  "$BIN" --quiet report run-*.json fit.json -o report.html
  e=$(date +%s.%N)
  echo "$s $e"
done | python3 -c '
import sys, statistics, os
walls = [float(e) - float(s) for s, e in (l.split() for l in sys.stdin)]
size = os.path.getsize("report.html")
print("  wall median %.0f ms (min %.0f, max %.0f) over %d runs" % (statistics.median(walls) * 1e3, min(walls) * 1e3, max(walls) * 1e3, len(walls)))
print("  HTML %.2f MB (%d bytes)" % (size / 1e6, size))
'
s=$(date +%s.%N)
"$BIN" --quiet report --no-statement run-*.json fit.json -o report-nostatement.html
e=$(date +%s.%N)
python3 -c "print('  without statements: %.0f ms' % ((float('$e') - float('$s')) * 1e3))"
