#!/usr/bin/env python3
"""What a per-framework efficiency factor would buy, cross-validated.

For every run of a framework the planner does not model, divide its predicted
throughput by the geometric mean of (1 + error) over the *other* runs of the same
framework (leave-one-out: a run never calibrates itself), then summarise all runs.
Runs that are their framework's only one keep their error. Used by
docs/methodology.md ("Validation against published runs").

    amdahl catalog validation --json | python3 scripts/analysis/framework_factor_loo.py
"""
import json
import math
import sys

runs = json.load(sys.stdin)["items"]
errors = []
for run in runs:
    error = run["error"]
    others = [o for o in runs if o["framework"] == run["framework"] and o is not run]
    if not run["modelled"] and others:
        factor = math.exp(sum(math.log1p(o["error"]) for o in others) / len(others))
        print(f"{run['name']:26} {run['error']:+7.1%} -> {(1 + error) / factor - 1:+7.1%}"
              f"  (factor {factor:.3f} from {len(others)} other runs)")
        error = (1 + error) / factor - 1
    errors.append(error)
beyond = sum(abs(e) > 0.12 for e in errors)
print(f"all {len(errors)} runs: mean |error| {sum(map(abs, errors)) / len(errors):.1%}, "
      f"{beyond} beyond 12 %")
