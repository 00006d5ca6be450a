#!/usr/bin/env bash
# Step time on 1 and 2 ranks (docs/distributed.md): bench_distributed_step
# in both modes, alone and under mpirun -np 2 (plain and sharded), RUNS
# times (default 3); prints each configuration's median over the runs.
#   bench/distributed.sh [RUNS]        (after cmake --build build)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
export OMP_NUM_THREADS=1
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
for _ in $(seq "$runs"); do
    for mode in step fit; do
        build/bench_distributed_step --mode "$mode" --steps 20 --runs 5
        "${mpi[@]}" build/bench_distributed_step --mode "$mode" --steps 20 --runs 5
        "${mpi[@]}" build/bench_distributed_step --mode "$mode" --shard --steps 20 --runs 5
    done
done | python3 -c '
import json, sys, statistics
rows = {}
for line in sys.stdin:
    m = json.loads(line)
    rows.setdefault((m["mode"], m["ranks"], m["sharded"]), []).append(m)
for (mode, ranks, sharded), v in rows.items():
    med = statistics.median(x["median_seconds"] for x in v) * 1e3
    ratio = statistics.median(x["ratio"] for x in v)
    print("%-4s ranks=%d sharded=%-5s median %7.2f ms/step (%s)  ratio to one process %.2f  slot bytes rank 0 %d"
          % (mode, ranks, sharded, med, ", ".join("%.2f" % (x["median_seconds"] * 1e3) for x in v), ratio,
             v[0]["slot_bytes_rank0"]))
'
