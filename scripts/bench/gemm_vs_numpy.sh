#!/usr/bin/env bash
# fp32 GEMM at n = 2048 on all cores: amdahl's figure next to numpy + OpenBLAS on the same machine.
#
# Usage: scripts/bench/gemm_vs_numpy.sh            (N, REPEATS and VENV can be overridden)
#
# What it does, in one run so both figures see the same machine state:
#   1. builds `amdahl` in release mode;
#   2. installs numpy (which bundles OpenBLAS) into a private venv (default target/bench-venv);
#   3. times C = A·B, fp32, n = N, all logical CPUs, 1 warm-up + REPEATS timed runs, both sides;
#   4. prints median GFLOP/s (2·n³ / t) of each and the ratio amdahl / numpy.
#
# OpenBLAS environment: some machines export OPENBLAS_CORETYPE (forcing one kernel family, e.g.
# Haswell = AVX2) and OPENBLAS_L2_SIZE. The headline numpy run UNSETS every OPENBLAS_* variable so
# OpenBLAS picks its own kernels for this CPU (its best case); if OPENBLAS_CORETYPE was set, a
# second numpy run with the machine's settings is shown for reference.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
N="${N:-2048}"
REPEATS="${REPEATS:-10}"
VENV="${VENV:-$ROOT/target/bench-venv}"
THREADS="$(nproc)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

echo "== building amdahl (release)" >&2
cargo build --release --quiet -p amdahl-cli --manifest-path "$ROOT/Cargo.toml"

if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating venv $VENV" >&2
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -c 'import numpy' 2>/dev/null || "$VENV/bin/pip" install --quiet numpy

echo "== amdahl: fp32 GEMM n=$N, $THREADS threads" >&2
"$ROOT/target/release/amdahl" bench gemm --precision fp32 --sizes "$N" \
  --threads "$THREADS" --repeats "$REPEATS" --json > "$TMP/amdahl.json"

cat > "$TMP/numpy_gemm.py" <<'PY'
import json, os, sys, time
import numpy as np
n, repeats = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(42)
a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
c = np.empty((n, n), dtype=np.float32)
np.matmul(a, b, out=c)  # warm-up (and OpenBLAS thread start)
times = []
for _ in range(repeats):
    t = time.perf_counter()
    np.matmul(a, b, out=c)
    times.append(time.perf_counter() - t)
times.sort()
med = times[len(times) // 2] if len(times) % 2 else 0.5 * (times[len(times) // 2 - 1] + times[len(times) // 2])
blas = "unknown"
try:
    cfg = np.show_config(mode="dicts")
    d = cfg["Build Dependencies"]["blas"]
    blas = f'{d.get("name")} {d.get("version")}'
except Exception:
    pass
print(json.dumps({"numpy": np.__version__, "blas": blas, "median_s": med, "min_s": times[0],
                  "coretype": os.environ.get("OPENBLAS_CORETYPE", "(unset: auto-detect)")}))
PY

echo "== numpy + OpenBLAS, OPENBLAS_* unset" >&2
env $(env | awk -F= '/^OPENBLAS_/ {printf "-u %s ", $1}') OPENBLAS_NUM_THREADS="$THREADS" \
  "$VENV/bin/python" "$TMP/numpy_gemm.py" "$N" "$REPEATS" > "$TMP/numpy.json"
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
  echo "== numpy + OpenBLAS, machine's OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE" >&2
  OPENBLAS_NUM_THREADS="$THREADS" "$VENV/bin/python" "$TMP/numpy_gemm.py" "$N" "$REPEATS" \
    > "$TMP/numpy_env.json"
fi

"$VENV/bin/python" - "$TMP" "$N" "$THREADS" <<'PY'
import json, os, sys
tmp, n, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
work = 2.0 * n ** 3
am = json.load(open(os.path.join(tmp, "amdahl.json")))
most = max(r["threads"] for r in am["rows"])
row = next(r for r in am["rows"] if r["threads"] == most and r["n"] == n)
a_med, a_max = row["rate"]["median"] / 1e9, row["rate"]["max"] / 1e9
print(f"fp32 GEMM, n = {n}, {threads} threads, median of timed runs (best in brackets)")
print(f"  amdahl (gemm crate)           {a_med:8.1f} GFLOP/s  ({a_max:.1f})")
ref = None
for name, label in [("numpy.json", "OPENBLAS_* unset"), ("numpy_env.json", "machine env")]:
    p = os.path.join(tmp, name)
    if not os.path.exists(p):
        continue
    d = json.load(open(p))
    med, best = work / d["median_s"] / 1e9, work / d["min_s"] / 1e9
    print(f"  numpy {d['numpy']} + {d['blas']}, {label} (coretype {d['coretype']})"
          f"\n                                {med:8.1f} GFLOP/s  ({best:.1f})")
    if ref is None:
        ref = med
if ref:
    print(f"  amdahl / numpy (OPENBLAS_* unset, medians): {100 * a_med / ref:.0f} %  (target >= 80 %)")
PY
