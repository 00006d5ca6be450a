#!/usr/bin/env bash
# The dense targets of docs/performance.md, each as a ratio to the triad
# measured in the same `optim bench` process: Adam, Lamb and Adafactor on one
# float32 variable of 50M parameters, Lamb again from iterations 20000 (its
# bias corrections rounded to 1 as in a long run: fewer divisions), and Adam
# on 10,000 variables of 1,000.
# Each bench call takes the median of 7 steps; the whole is repeated RUNS
# times (default 3) and the median ratio printed per case.
#   OMP_NUM_THREADS=2 bench/dense_targets.sh [RUNS [OPTIM]]   (after cmake --build build)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
optim=${2:-build/optim}
threads=${OMP_NUM_THREADS:-2}
for _ in $(seq "$runs"); do
    "$optim" bench --json --threads "$threads" --size 50000000 adam lamb adafactor
    "$optim" bench --json --threads "$threads" --size 50000000 --iterations 20000 lamb
    "$optim" bench --json --threads "$threads" --size 10000000 --tensors 10000 adam
done |
python3 -c '
import json, sys, statistics
rows = {}
for line in sys.stdin:
    m = json.loads(line)
    key = "%s, %d params in %d variable(s)" % (m["class_name"], m["elements"], m.get("tensors", 1))
    if m.get("iterations"):
        key += ", from iterations %d" % m["iterations"]
    rows.setdefault(key, []).append(m["ratio"])
for key, r in rows.items():
    print("%-66s median ratio %.2f  (%s)" % (key, statistics.median(r), ", ".join("%.2f" % x for x in r)))
'
