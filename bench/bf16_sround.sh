#!/usr/bin/env bash
# What stochastic rounding of BF16 (docs/half-precision.md) costs: `optim
# bench --dtype bf16` Adam (16.7M parameters) off (no key) and on
# ("bf16_stochastic_rounding_seed"), and, when BASE names another build's
# `optim` (one built without the option, e.g. main before it), that one too,
# alternated in each of RUNS rounds (default 9). Each bench call is the
# median of 7 steps; printed: the median step time of each, and the median
# over rounds of each one's time / the first one's time in the same round.
#   OMP_NUM_THREADS=2 bench/bf16_sround.sh [RUNS [BASE]]   (after cmake --build build)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-9}
base=${2:-}
threads=${OMP_NUM_THREADS:-2}
on='{"class_name": "Adam", "config": {"bf16_stochastic_rounding_seed": 1}}'
for r in $(seq "$runs"); do
    if [ -n "$base" ]; then "$base" bench --json --runs 7 --threads "$threads" --dtype bf16 adam | sed "s/^/$r base /"; fi
    build/optim bench --json --runs 7 --threads "$threads" --dtype bf16 adam | sed "s/^/$r off /"
    build/optim bench --json --runs 7 --threads "$threads" --dtype bf16 "$on" | sed "s/^/$r on /"
done |
python3 -c '
import json, sys, statistics
t, order = {}, []
for line in sys.stdin:
    r, tag, js = line.split(" ", 2)
    if tag not in order:
        order.append(tag)
    t.setdefault(tag, {})[r] = json.loads(js)["median_seconds"]
first = order[0]
for tag in order:
    rel = [t[tag][r] / t[first][r] for r in t[first]]
    print("%-4s median %.4f s  time / %s in the same round: median %.3f  (%s)" % (
        tag, statistics.median(t[tag].values()), first, statistics.median(rel), ", ".join("%.2f" % x for x in rel)))
'
