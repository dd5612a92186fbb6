#!/usr/bin/env bash
# Benchmark of `amdahl serve`: 10,000 requests of Llama-3-70B on 8 x H100 at 80 % of
# the simulated capacity, wall time and simulated requests per second (best of 5), beside
# `infer --search` over the same node in the same run, and `serve --search` (220 configurations
# of that node, 1,000 requests each); then the whole command (process start,
# catalogs, simulation, rendering), 5 runs of the release binary.
#
# Usage: scripts/bench/serve.sh   (env: AMDAHL_BIN, default target/release/amdahl)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
cargo run --quiet --release -p amdahl-model --example bench_serve
BIN=${AMDAHL_BIN:-target/release/amdahl}
[ -x "$BIN" ] || cargo build --quiet --release -p amdahl-cli
echo
echo "whole command: $BIN serve --model llama3-70b --system h100 --tp 8 --rate 11 --requests 10000 ... --json (5 runs)"
for i in 1 2 3 4 5; do
  s=$(date +%s.%N)
  "$BIN" serve --model llama3-70b --system h100 --tp 8 --rate 11 --requests 10000 \
    --input-dist lognormal:1024:0.8 --output-dist lognormal:256:0.8 --json > /dev/null
  e=$(date +%s.%N)
  python3 -c "import sys; print(f\"  wall {(float(sys.argv[2]) - float(sys.argv[1])) * 1e3:7.1f} ms\")" "$s" "$e"
done
