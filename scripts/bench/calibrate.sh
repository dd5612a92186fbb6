#!/usr/bin/env bash
# Benchmark of `amdahl calibrate` and of `plan --search` with a calibration loaded: the fit on
# 1,000 measured training rows (step time and power each; synthesised from the model with known
# constants and 2 % noise), and the search of Llama-2-70B on 1,024 H100 with and without the
# fitted calibration, side by side (library, best of 3 and 5). Then the whole command on the same
# 1,000 rows as a CSV (process start, parsing every row's `plan …` arguments, the fit), median
# of 3 runs of the release binary, and `plan --search` with and without `--calibration`.
#
# Usage: scripts/bench/calibrate.sh   (env: AMDAHL_BIN, default target/release/amdahl)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cargo run --quiet --release -p amdahl-model --example bench_calibrate -- "$TMP/rows.csv"
BIN=${AMDAHL_BIN:-target/release/amdahl}
[ -x "$BIN" ] || cargo build --quiet --release -p amdahl-cli
wall() { local s=$EPOCHREALTIME; "$@" > /dev/null; local e=$EPOCHREALTIME; awk "BEGIN { printf \"%.3f\", $e - $s }"; }
echo
echo "whole command: $BIN calibrate rows.csv (1,000 rows), 3 runs"
for i in 1 2 3; do echo "  wall $(wall "$BIN" -q calibrate "$TMP/rows.csv" -o "$TMP/cal.json") s"; done
SEARCH=(plan --model llama-2-70b --system h100 --gpus 1024 --batch 1024 --flash --search --json)
echo "plan --search, uncalibrated vs calibrated (3 runs each, interleaved)"
for i in 1 2 3; do
  echo "  uncalibrated $(wall "$BIN" -q "${SEARCH[@]}") s   calibrated $(wall "$BIN" -q "${SEARCH[@]}" --calibration "$TMP/cal.json") s"
done
