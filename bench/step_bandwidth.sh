#!/usr/bin/env bash
# Every built-in's dense float32 step against a same-run triad (optim bench),
# RUNS times (default 3); prints each optimizer's median ratio over the runs.
#   bench/step_bandwidth.sh [RUNS]        (after cmake --build build)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
for _ in $(seq "$runs"); do build/optim bench --json; done |
python3 -c '
import json, sys, statistics
rows = {}
for line in sys.stdin:
    m = json.loads(line)
    rows.setdefault(m["config"], []).append(m["ratio"])
for config, r in rows.items():
    print("%-64s median ratio %.2f  (%s)" % (config, statistics.median(r), ", ".join("%.2f" % x for x in r)))
'
