#!/usr/bin/env bash
# Benchmark of `amdahl infer --search`: Llama 3.1 405B on 8 x H100, TP in divisors of
# 8, batch 1..1024, four weight formats. Prints configurations evaluated per second and the wall
# time, first of the library search (best of 5), then of the whole command (process start,
# catalogs, search, rendering), median of 5 runs of the release binary.
#
# Usage: scripts/bench/infer_search.sh   (env: AMDAHL_BIN, default target/release/amdahl)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
cargo run --quiet --release -p amdahl-model --example bench_infer_search
BIN=${AMDAHL_BIN:-target/release/amdahl}
[ -x "$BIN" ] || cargo build --quiet --release -p amdahl-cli
echo
echo "whole command: $BIN infer --model llama-405b --system h100 --gpus 8 --search --json (5 runs)"
for i in 1 2 3 4 5; do
  s=$(date +%s.%N)
  "$BIN" infer --model llama-405b --system h100 --gpus 8 --search --kv-precision fp8 --json > /tmp/amdahl-infer-search.json
  e=$(date +%s.%N)
  python3 - "$s" "$e" <<'PY'
import json, sys
r = json.load(open("/tmp/amdahl-infer-search.json"))
wall = float(sys.argv[2]) - float(sys.argv[1])
print(f"  wall {wall*1e3:7.1f} ms  evaluated {r['evaluated']}  search {r['wall_s']*1e3:6.2f} ms  {r['configs_per_s']:.0f} configs/s")
PY
done
