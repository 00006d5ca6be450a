#!/bin/bash
# The lazy sparse step on a table and on twice its rows, alternated.
#
#     bench/sparse_double.sh [OPTIM [ROUNDS [ROWS [COLS [INDICES]]]]]
#
# ROUNDS times (default 3): `optim bench --sparse` on ROWS (default
# 1,000,000) and on 2 x ROWS rows of COLS (64) floats with INDICES (4096)
# indices, for LazyAdam and legacy Adagrad; prints each run's medians and,
# per config, the median over the rounds of time(2 x ROWS) / time(ROWS).
# A step that costs in proportion to the rows it touches gives about 1.
# The same for the steps' CPU time (cpu_median_seconds), which a loaded
# machine disturbs less (run with OMP_WAIT_POLICY=passive).
set -euo pipefail
optim=${1:-build/optim}
rounds=${2:-3}
rows=${3:-1000000}
cols=${4:-64}
n=${5:-4096}
configs=(lazyadam '{"class_name": "Adagrad", "config": {"is_legacy_optimizer": true}}')
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((k = 0; k < rounds; k++)); do
  for r in "$rows" $((2 * rows)); do
    "$optim" bench --json --runs 7 --sparse "$r" "$cols" "$n" "${configs[@]}" | tee -a "$out"
  done
done
/usr/bin/python3 - "$out" "$rows" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
base = int(sys.argv[2])
for name in dict.fromkeys(r["config"] for r in runs):
    for key in ("median_seconds", "cpu_median_seconds"):
        one = [r[key] for r in runs if r["config"] == name and r["rows"] == base]
        two = [r[key] for r in runs if r["config"] == name and r["rows"] == 2 * base]
        ratios = [b / a for a, b in zip(one, two)]
        print(f"{name} ({'CPU' if key.startswith('cpu') else 'wall'}): {base} rows "
              f"{1e3 * statistics.median(one):.3f} ms, {2 * base} rows {1e3 * statistics.median(two):.3f} ms, "
              f"ratio per round {[round(x, 2) for x in ratios]}, median {statistics.median(ratios):.2f}")
PY
