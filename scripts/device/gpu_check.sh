#!/usr/bin/env bash
# GPU check for the session that is lent a GPU machine (issues 6 and 4, "GPU" sections).
#
# What it measures, all within ~5 minutes, results under $OUT:
#   1. `amdahl detect`                                       -> detect.txt (NVML seen?)
#   2. `amdahl bench gpu --quick` (table)                    -> bench_gpu_quick.txt
#   3. `amdahl bench gpu` full sizes, JSON, with the device-memory copy and NVML power
#      (idle, GEMM, copy) and the device profile             -> bench_gpu.json, profile.json
#   4. `amdahl run` around a ~20 s fp16 GEMM loop            -> run.json, samples.jsonl, run.txt
#      with nvidia-smi polling power at 100 ms beside it     -> nvsmi_power.csv
#   5. the NVML energy counter vs the NVML power integrated by amdahl (run.json device note)
#      vs nvidia-smi's power integrated here                 -> summary.txt
#
# The device machine has no cargo and no network: build here, carry the binary.
#   cargo build --release -p amdahl-cli
# then, with the run tool (the binary is under the ignored target/, so it must be carried; it must
# be < 64 MiB: if it is larger, `strip -o target/amdahl-gpu target/release/amdahl` and carry that
# with AMDAHL=target/amdahl-gpu):
#   run(command="bash scripts/device/gpu_check.sh", carry=["target/release/amdahl"], timeout_s=420)
# Dry run here, against the test fixture's fake driver (checks the script, not the GPU):
#   cc -O2 -shared -fPIC -o /tmp/fake/libcuda.so.1 crates/amdahl-cli/tests/fixtures/fake_cuda.c
#   cp /tmp/fake/libcuda.so.1 /tmp/fake/libcublas.so.12
#   LD_LIBRARY_PATH=/tmp/fake AMDAHL=target/debug/amdahl GEMM_N=64 LOOP_S=2 \
#     EXTRA="--sizes 64 --copy-mib 1" OUT=/tmp/gpu-dry bash scripts/device/gpu_check.sh
# Each step has its own timeout, so a hang in one still leaves the others' files in $OUT.
#
# cuBLAS: cudarc loads libcuda.so.1 (driver) and libcublas.so[.12] at run time. This script looks
# for libcublas in the usual places (CUDA toolkit, system libs, pip's nvidia-cublas-cu12 wheel,
# e.g. from a PyTorch install) and puts it on LD_LIBRARY_PATH. Without cuBLAS the GEMMs are
# reported as "not measured" and the copy bandwidth is still measured.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/amdahl-gpu-check}"
mkdir -p "$OUT"
AMDAHL="${AMDAHL:-target/release/amdahl}"
# The energy step's GEMM order and length (smaller for a dry run against the fake driver).
GEMM_N="${GEMM_N:-8192}"
LOOP_S="${LOOP_S:-20}"
# Extra flags for both `bench gpu` steps (a dry run: EXTRA="--sizes 64 --copy-mib 1").
read -r -a EXTRA_ARGS <<< "${EXTRA:-}"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/steps.log" >&2; }

if [ ! -x "$AMDAHL" ]; then
  log "no amdahl binary at $AMDAHL: build it with 'cargo build --release -p amdahl-cli' and carry it"
  exit 1
fi

{
  echo "== uname"; uname -a
  echo "== nvidia-smi"; nvidia-smi 2>&1 | head -30
  echo "== libs"; ldconfig -p 2>/dev/null | grep -E "libcuda\.so|libcublas|libnvidia-ml" || true
} > "$OUT/env.txt" 2>&1

# --- find cuBLAS ------------------------------------------------------------------------------
libdir=$(mktemp -d)   # symlinks stay out of $OUT
cublas=""
for pat in /usr/local/cuda/lib64/libcublas.so* /usr/local/cuda-*/lib64/libcublas.so* \
           /usr/lib/x86_64-linux-gnu/libcublas.so* /usr/lib64/libcublas.so* \
           /usr/local/lib/python3*/dist-packages/nvidia/cublas/lib/libcublas.so* \
           /usr/lib/python3*/site-packages/nvidia/cublas/lib/libcublas.so* \
           /usr/local/lib/python3*/site-packages/nvidia/cublas/lib/libcublas.so* \
           /opt/conda/lib/libcublas.so* /opt/conda/lib/python3*/site-packages/nvidia/cublas/lib/libcublas.so*; do
  [ -e "$pat" ] && { cublas="$pat"; break; }
done
if [ -z "$cublas" ]; then
  IFS=: read -r -a ldirs <<< "${LD_LIBRARY_PATH:-}"
  for d in "${ldirs[@]}"; do
    for f in "$d"/libcublas.so*; do [ -e "$f" ] && { cublas="$f"; break 2; }; done
  done
fi
if [ -z "$cublas" ]; then
  cublas=$(ldconfig -p 2>/dev/null | awk '/libcublas\.so/ {print $NF; exit}')
fi
if [ -z "$cublas" ] && command -v python3 >/dev/null; then
  cublas=$(python3 - <<'PY' 2>/dev/null
import glob, site, sys
for d in site.getsitepackages() + [site.getusersitepackages()]:
    for f in sorted(glob.glob(d + "/nvidia/cublas/lib/libcublas.so*")):
        print(f); sys.exit()
PY
)
fi
if [ -n "$cublas" ]; then
  dir=$(dirname "$cublas")
  # cudarc tries libcublas.so, .so.12, .so.11, ...; a plain name covers any other major version.
  ln -sf "$cublas" "$libdir/libcublas.so"
  for lt in "$dir"/libcublasLt.so*; do [ -e "$lt" ] && ln -sf "$lt" "$libdir/libcublasLt.so"; done
  export LD_LIBRARY_PATH="$libdir:$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  log "cuBLAS: $cublas"
else
  log "cuBLAS not found: GEMMs will be reported as not measured"
fi

# --- 1. detect ----------------------------------------------------------------------------------
log "detect"
timeout 30 "$AMDAHL" detect > "$OUT/detect.txt" 2>&1; log "detect rc=$?"

# --- 2. quick bench (table) ---------------------------------------------------------------------
log "bench gpu --quick"
timeout 90 "$AMDAHL" bench gpu --quick "${EXTRA_ARGS[@]}" > "$OUT/bench_gpu_quick.txt" 2> "$OUT/bench_gpu_quick.err"
log "bench gpu --quick rc=$?"

# --- 3. full bench (JSON) -----------------------------------------------------------------------
log "bench gpu (full sizes, json)"
timeout 150 "$AMDAHL" bench gpu --repeats 10 "${EXTRA_ARGS[@]}" --json --profile-out "$OUT/profile.json" \
  > "$OUT/bench_gpu.json" 2> "$OUT/bench_gpu.err"
log "bench gpu rc=$?"

# --- 4. energy: amdahl run around a ~20 s GEMM loop, nvidia-smi beside it -----------------------
poll=""
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,timestamp,power.draw --format=csv,noheader,nounits -lms 100 \
    > "$OUT/nvsmi_power.csv" 2>/dev/null &
  poll=$!
fi
log "amdahl run -- bench gpu fp16 n=$GEMM_N for $LOOP_S s"
timeout 90 "$AMDAHL" run --interval 250ms --baseline 3s -o "$OUT/run.json" --log "$OUT/samples.jsonl" -- \
  "$AMDAHL" bench gpu --no-copy --device-mib 0 --power-window 0 --precision fp16 --sizes "$GEMM_N" \
  --repeats 1 --min-time "$LOOP_S" --json \
  > "$OUT/run_child.json" 2> "$OUT/run.txt"
log "amdahl run rc=$?"
[ -n "$poll" ] && kill "$poll" 2>/dev/null

# --- 5. summary ---------------------------------------------------------------------------------
if command -v python3 >/dev/null; then
  python3 - "$OUT" > "$OUT/summary.txt" 2>&1 <<'PY'
import json, sys, datetime
out = sys.argv[1]
def load(name):
    try:
        return json.load(open(f"{out}/{name}"))
    except Exception as e:
        print(f"{name}: unreadable ({e})"); return None
def bench_summary():
    b = load("bench_gpu.json")
    if not b:
        return
    d = b["device"]
    print(f"GPU: {d['name']} cc {d['compute_capability']} driver CUDA {d['driver_cuda_version']}")
    for g in b["gemm"]:
        print(f"gemm {g['precision']:5} n={g['n']:6} median {g['flops']['median']/1e12:9.2f} T/s"
              f"  max {g['flops']['max']/1e12:9.2f}  copy share {g['copy_share']}")
    for c in b["copies"]:
        print(f"copy {c['direction']} {c['host']:8} {c['bytes']>>20:5} MiB median {c['bandwidth']['median']/1e9:7.2f} GB/s")
    for m in b["not_measured"]:
        print(f"not measured: {m['what']}: {m['reason']}")

def run_summary():
    r = load("run.json")
    if not r:
        return
    print(f"run: {r['duration_s']:.2f} s, exit {r['exit_code']}, partial {r['partial']}")
    for dev in r["devices"]:
        print(f"  {dev['id']:8} {dev['method']:16} {dev['energy_j']:10.1f} J avg {dev['avg_power_w']:7.1f} W"
              f"  note: {dev.get('note')}")
    if r.get("baseline"):
        print(f"  baseline idle {r['baseline']['power_w']:.1f} W, net {r['baseline']['net_energy_j']:.1f} J")
    # nvidia-smi power integrated (trapezoid) over the run's wall-clock window; its timestamps
    # are local time, as is datetime's default.
    t0 = r["started_unix_s"]; t1 = t0 + r["duration_s"]
    pts = {}
    try:
        for line in open(f"{out}/nvsmi_power.csv"):
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 3:
                continue
            try:
                ts = datetime.datetime.strptime(parts[1], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                pts.setdefault(parts[0], []).append((ts, float(parts[2])))
            except ValueError:
                continue
    except OSError:
        print("  nvidia-smi: no power log")
    for idx, p in sorted(pts.items()):
        p = [x for x in p if t0 <= x[0] <= t1]
        e = sum((b[0]-a[0])*(a[1]+b[1])/2 for a, b in zip(p, p[1:]))
        span = p[-1][0]-p[0][0] if len(p) > 1 else 0
        print(f"  nvidia-smi gpu {idx}: {len(p)} readings over {span:.1f} s, integrated {e:.1f} J")

for part in (bench_summary, run_summary):
    try:
        part()
    except Exception as e:
        print(f"{part.__name__} failed: {e!r}")
PY
fi
log "done; files in $OUT"
cat "$OUT/summary.txt" 2>/dev/null
