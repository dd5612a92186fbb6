#!/usr/bin/env bash
# Cost of `amdahl exporter`: 500 processes in 50 cgroups (a fake /proc tree: the real
# file layout in a temp dir, ticks advancing every second) at a 1 s interval. Prints the
# exporter's CPU % of one core and RSS, idle and under 20 concurrent scrapers, and the scrape
# latency p50/p99 over SECONDS (default 30) of each phase. Loopback only.
#
# Usage: scripts/bench/exporter.sh      (env: AMDAHL_BIN, default target/release/amdahl; SECONDS)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
BIN="${AMDAHL_BIN:-target/release/amdahl}"
[ -x "$BIN" ] || cargo build --release -p amdahl-cli
PROFILE="${PROFILE:-release}"   # PROFILE=dev measures a debug build (our crates unoptimised)
S="${SECONDS_PER_PHASE:-30}"
cargo run -q --profile "$PROFILE" -p amdahl-cli --example bench_exporter -- "$BIN" "$S"
cargo run -q --profile "$PROFILE" -p amdahl-cli --example bench_exporter -- "$BIN" "$S" --no-process-series
# Where one sample's time goes (read /proc, attribute, snapshot, render), /proc files re-read
# every sample vs kept between samples, side by side.
cargo run -q --profile "$PROFILE" -p amdahl-cli --example bench_exporter_phases -- 200
