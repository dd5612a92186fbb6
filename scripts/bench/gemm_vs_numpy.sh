#!/usr/bin/env bash
# fp32 GEMM at n = 2048 on all cores: amdahl's figure next to numpy + OpenBLAS on the same machine.
#
# Usage: scripts/bench/gemm_vs_numpy.sh            (N, REPEATS and VENV can be overridden)
#
# What it does, in one run so both figures see the same machine state:
#   1. builds `amdahl` in release mode, twice: the default build (the gemm crate's AVX-512
#      kernels where the CPU has them) and one with --no-default-features (AVX2+FMA kernels
#      only), kept in target/avx2, to show what the AVX-512 kernels are worth;
#   2. installs numpy (which bundles OpenBLAS) into a private venv (default target/bench-venv);
#   3. times C = A·B, fp32, n = N, all logical CPUs, 1 warm-up + REPEATS timed runs, both sides,
#      alternating amdahl and numpy for ROUNDS rounds so a change in machine load hits both;
#   4. prints GFLOP/s (2·n³ / t) of each — median over all timed runs and best run — and the ratio
#      amdahl / numpy of the medians.
#
# OpenBLAS environment: some machines export OPENBLAS_CORETYPE (forcing one kernel family, e.g.
# Haswell = AVX2) and OPENBLAS_L2_SIZE. The headline numpy run UNSETS every OPENBLAS_* variable so
# OpenBLAS picks its own kernels for this CPU (its best case); if OPENBLAS_CORETYPE was set, a
# second numpy run with the machine's settings is shown for reference.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
N="${N:-2048}"
REPEATS="${REPEATS:-10}"
ROUNDS="${ROUNDS:-3}"
VENV="${VENV:-$ROOT/target/bench-venv}"
THREADS="$(nproc)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

echo "== building amdahl (release, default features)" >&2
cargo build --release --quiet -p amdahl-cli --manifest-path "$ROOT/Cargo.toml"
echo "== building amdahl (release, AVX2 kernels only: --no-default-features)" >&2
CARGO_TARGET_DIR="$ROOT/target/avx2" cargo build --release --quiet -p amdahl-cli \
  --no-default-features --manifest-path "$ROOT/Cargo.toml"
AVX2_BIN="$ROOT/target/avx2/release/amdahl"

if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating venv $VENV" >&2
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -c 'import numpy' 2>/dev/null || "$VENV/bin/pip" install --quiet numpy

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
blas = "unknown"
try:
    cfg = np.show_config(mode="dicts")
    d = cfg["Build Dependencies"]["blas"]
    blas = f'{d.get("name")} {d.get("version")}'
except Exception:
    pass
print(json.dumps({"numpy": np.__version__, "blas": blas, "times": times,
                  "coretype": os.environ.get("OPENBLAS_CORETYPE", "(unset: auto-detect)")}))
PY

UNSET_OPENBLAS=$(env | awk -F= '/^OPENBLAS_/ {printf "-u %s ", $1}')
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round/$ROUNDS: amdahl, fp32 GEMM n=$N, $THREADS threads" >&2
  "$ROOT/target/release/amdahl" bench gemm --precision fp32 --sizes "$N" \
    --threads "$THREADS" --repeats "$REPEATS" --json > "$TMP/amdahl.$round.json"
  echo "== round $round/$ROUNDS: amdahl (AVX2-only build)" >&2
  "$AVX2_BIN" bench gemm --precision fp32 --sizes "$N" \
    --threads "$THREADS" --repeats "$REPEATS" --json > "$TMP/amdahl_avx2.$round.json"
  echo "== round $round/$ROUNDS: numpy + OpenBLAS, OPENBLAS_* unset" >&2
  # shellcheck disable=SC2086
  env $UNSET_OPENBLAS OPENBLAS_NUM_THREADS="$THREADS" \
    "$VENV/bin/python" "$TMP/numpy_gemm.py" "$N" "$REPEATS" > "$TMP/numpy.$round.json"
  if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
    echo "== round $round/$ROUNDS: numpy + OpenBLAS, machine's OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE" >&2
    OPENBLAS_NUM_THREADS="$THREADS" "$VENV/bin/python" "$TMP/numpy_gemm.py" "$N" "$REPEATS" \
      > "$TMP/numpy_env.$round.json"
  fi
done

"$VENV/bin/python" - "$TMP" "$N" "$THREADS" "$ROUNDS" <<'PY'
import glob, json, os, statistics, sys
tmp, n, threads, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
work = 2.0 * n ** 3
def rates(times):
    return statistics.median(work / t / 1e9 for t in times), max(work / t / 1e9 for t in times)
# amdahl's JSON keeps min/median/max per round: the median of the per-round medians, best run.
def amdahl(stem):
    meds, best, kernel = [], 0.0, ""
    for p in sorted(glob.glob(os.path.join(tmp, f"{stem}.*.json"))):
        am = json.load(open(p))
        most = max(r["threads"] for r in am["rows"])
        row = next(r for r in am["rows"] if r["threads"] == most and r["n"] == n)
        meds.append(row["rate"]["median"] / 1e9)
        best = max(best, row["rate"]["max"] / 1e9)
        kernel = am["precisions"][0]["kernel"]
    return (statistics.median(meds), best, meds, kernel) if meds else None
print(f"fp32 GEMM, n = {n}, {threads} threads, {rounds} alternating rounds")
print("  GFLOP/s: median (of per-round medians for amdahl, of all runs for numpy), best run")
ours = {}
for stem, label in [("amdahl", "amdahl, default build"), ("amdahl_avx2", "amdahl, AVX2-only build")]:
    r = amdahl(stem)
    if r:
        ours[label] = r[0]
        print(f"  {label:<27}{r[0]:8.1f}   best {r[1]:.1f}   rounds {[round(x, 1) for x in r[2]]}")
        print(f"      kernel: {r[3]}")
ref = None
for stem, label in [("numpy", "OPENBLAS_* unset"), ("numpy_env", "machine's OPENBLAS_* env")]:
    files = sorted(glob.glob(os.path.join(tmp, f"{stem}.*.json")))
    if not files:
        continue
    ds = [json.load(open(p)) for p in files]
    times = [t for d in ds for t in d["times"]]
    med, best = rates(times)
    d = ds[0]
    print(f"  numpy {d['numpy']} + {d['blas']}, {label} (coretype {d['coretype']})")
    print(f"                               {med:8.1f}   best {best:.1f}")
    if ref is None:
        ref = med
if ref:
    for label, med in ours.items():
        print(f"  {label} / numpy (OPENBLAS_* unset, medians): {100 * med / ref:.0f} %  (target >= 80 %)")
PY
