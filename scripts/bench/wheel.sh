#!/usr/bin/env bash
# The Python wheel's size and speed, two builds side by side: each wheel's file size and installed
# size (`du -sb` of the package and its dist-info), then the console script and `amdahl.plan` of
# each, interleaved, 5 repetitions, medians in seconds. Building the wheels is left to you (about
# 10 minutes each on 2 cores):
#
#   maturin build --release      -m crates/amdahl-py/Cargo.toml --out /tmp/release
#   maturin build --profile dist -m crates/amdahl-py/Cargo.toml --out /tmp/dist
#   scripts/bench/wheel.sh /tmp/release/amdahl_ml-*.whl /tmp/dist/amdahl_ml-*.whl
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 WHEEL_A WHEEL_B" >&2; exit 2; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
names=(a b); wheels=("$1" "$2")
for i in 0 1; do
  python3 -m venv "$work/${names[$i]}"
  "$work/${names[$i]}/bin/pip" install -q --disable-pip-version-check "${wheels[$i]}"
  site=$("$work/${names[$i]}/bin/python" -c 'import amdahl, os; print(os.path.dirname(os.path.dirname(amdahl.__file__)))')
  installed=$(du -sbc "$site"/amdahl "$site"/amdahl_ml-*.dist-info | tail -1 | cut -f1)
  echo "${names[$i]}: $(basename "${wheels[$i]}"): wheel $(stat -c %s "${wheels[$i]}") B, installed $installed B"
done
seconds() { local s; s=$(date +%s.%N); "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }; echo "$(date +%s.%N) - $s" | bc; }
declare -A t
for _ in 1 2 3 4 5; do
  for v in "${names[@]}"; do
    A="$work/$v/bin/amdahl" P="$work/$v/bin/python"
    t[$v,plan-search]+=" $(seconds "$A" plan --model llama2-70b --system h100 --gpus 1024 --batch 1024 --search -q)"
    t[$v,infer-search-caps]+=" $(seconds "$A" infer --model llama3-405b --system h100 --gpus 8 --search --search-power-cap 350,400,450,500,550,600,650,700 -q)"
    t[$v,serve-10k]+=" $(seconds "$A" serve --model llama3-70b --system h100 --tp 8 --rate 20 --requests 10000 -q)"
    t[$v,demo]+=" $(rm -rf "$work/demo"; seconds "$A" demo --out "$work/demo" -q)"
    t[$v,py-plan-x50]+=" $(seconds "$P" -c 'import amdahl
for _ in range(50): amdahl.plan(model="megatron-530b", system="a100-80gb", gpus=2520, tp=8, pp=35, mbs=1, batch=2520, recompute="full")')"
  done
done
median() { tr ' ' '\n' | grep . | sort -g | sed -n 3p; }
printf '%-20s %10s %10s %8s\n' what a b b/a
for k in plan-search infer-search-caps serve-10k demo py-plan-x50; do
  ma=$(echo "${t[a,$k]}" | median); mb=$(echo "${t[b,$k]}" | median)
  printf '%-20s %10.4f %10.4f %8.2f\n' "$k" "$ma" "$mb" "$(echo "$mb / $ma" | bc -l)"
done
