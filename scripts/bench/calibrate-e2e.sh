#!/usr/bin/env bash
# The measure → calibrate → predict loop on this machine's CPU, end to end: profile the fp32 GEMM
# on one thread (`bench gemm --profile-out`), measure GEMM loops of five orders with `amdahl run`
# (the benchmark's own loop, 1 warm-up + the repeats that make GFLOP giga-FLOPs, so every run
# lasts long enough, about a second at 50 GFLOP/s, that starting the process and checking the
# product, which every run pays once, are a per cent of it), calibrate on four, and predict the
# held-back one (`--check`). Prints the fitted constants and the held-back error.
#
# Usage: scripts/bench/calibrate-e2e.sh   (env: AMDAHL_BIN, default target/release/amdahl;
#        GFLOP, default 50; HELD, the held-back order of 96, 128, 192, 256, 320, default 192)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BIN=${AMDAHL_BIN:-target/release/amdahl}
[ -x "$BIN" ] || cargo build --quiet --release -p amdahl-cli
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
GFLOP=${GFLOP:-50}
HELD=${HELD:-192}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
"$BIN" -q bench gemm --sizes 64,128,256,384 --precision fp32 --threads 1 --profile-out cpu.json > /dev/null
echo "command,run,steps" > runs.csv
echo "command,run,steps" > held.csv
for n in 96 128 192 256 320; do
  R=$(( GFLOP * 1000000000 / (2 * n * n * n) + 1 ))
  "$BIN" -q run -o "run-$n.json" -- "$BIN" -q bench gemm --sizes "$n" --precision fp32 \
    --threads 1 --repeats "$R" > /dev/null 2>&1
  if [ "$n" = "$HELD" ]; then f=held.csv; else f=runs.csv; fi
  echo "gemm --n $n,run-$n.json,$((R + 1))" >> "$f"
done
"$BIN" calibrate runs.csv --device-profile cpu.json --check held.csv
