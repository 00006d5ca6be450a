#!/usr/bin/python3
"""optim against PyTorch on the same work, measured in the same run.

    bench/torch_compare.py [--optim build/optim] [--threads T] [--runs R]
                           [--sparse ROWS COLS INDICES] [--double] [--cpu]
                           [--size N] [--tensors K...] [COMPARISON...]

Each comparison is one function, compare_<name>(args): it runs
`optim bench --json` for its work, times the PyTorch equivalent in this
process (Debian's python3-torch, hence /usr/bin/python3) on the same thread count, and prints one
line per optim config: both medians and torch/optim (above 1: optim is
faster). The machine is noisy: read the ratios, not the times.

compare_sparse: one step on a [ROWS, COLS] float32 embedding table with
INDICES random row indices (the same indices and values `optim bench
--sparse` draws: splitmix64, seed 20261201, one in 16 a repeat), against
torch.optim.SparseAdam (lazy Adam: only the indexed rows) stepping an
uncoalesced torch.sparse_coo_tensor gradient. The optim configs are
LazyAdam and the legacy lazy kernels (torch has a sparse rule for Adam
only, so SparseAdam is the peer for all of them), then Keras 3 Adam, whose
dense-equivalent step touches the whole table (its line also gives the
sparse step against a dense step of the same table). --double runs it
again on 2 x ROWS rows and prints each config's time ratio (a lazy step
should not grow with the table). --cpu compares the steps' CPU time (the
process's, all threads) instead of the wall clock: on a machine loaded by
other work a step's wall time mostly counts the waits for a core, its CPU
time much less so. Run it with OMP_WAIT_POLICY=passive (so that neither
side's waiting threads spin) and best with --threads 1.

compare_dense: a float32 Adam step (PyTorch's defaults: lr 1e-3, betas
0.9/0.999, eps 1e-8; optim's Keras 3 Adam with epsilon 1e-8) on N
parameters split into K tensors, for each K given: `optim bench --tensors
K` against torch.optim.Adam with its for-loop (foreach=False) and with
foreach=True (its multi-tensor kernels).

COMPARISON names the comparisons to run (default: all): sparse, dense.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

import torch

MASK = (1 << 64) - 1

SPARSE_CONFIGS = [
    '{"class_name": "LazyAdam", "config": {}}',
    '{"class_name": "LazyAdam", "config": {"is_legacy_optimizer": true}}',
    '{"class_name": "SGD", "config": {"is_legacy_optimizer": true}}',
    '{"class_name": "SGD", "config": {"is_legacy_optimizer": true, "momentum": 0.9}}',
    '{"class_name": "Adagrad", "config": {"is_legacy_optimizer": true}}',
    '{"class_name": "Adadelta", "config": {"is_legacy_optimizer": true}}',
    '{"class_name": "Adamax", "config": {"is_legacy_optimizer": true}}',
    '{"class_name": "Ftrl", "config": {"is_legacy_optimizer": true}}',
    '{"class_name": "RMSprop", "config": {"is_legacy_optimizer": true, "momentum": 0.9}}',
    '{"class_name": "Adam", "config": {"is_legacy_optimizer": false}}',
]


def splitmix(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def sparse_work(rows, cols, n):
    """The indices and values of tools/bench_sparse.c's work_make."""
    s, idx = 20261201, []
    for j in range(n):
        s, r = splitmix(s)
        idx.append(idx[r % j] if j % 16 == 15 else r % rows)
    vals = []
    for _ in range(n * cols):
        s, r = splitmix(s)
        vals.append(1e-3 * (r % 2001) - 1.0)
    return (torch.tensor(idx, dtype=torch.int64),
            torch.tensor(vals, dtype=torch.float32).reshape(n, cols))


def optim_bench(args, extra, configs):
    cmd = [args.optim, "bench", "--json", "--runs", str(args.runs), "--threads", str(args.threads)]
    out = subprocess.run(cmd + extra + configs, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def torch_sparse_adam(rows, cols, idx, vals, runs, cpu=False):
    """Median seconds of a SparseAdam step after a warm-up step (CPU
    seconds of the process with cpu)."""
    w = torch.nn.Parameter(torch.zeros(rows, cols, dtype=torch.float32))
    opt = torch.optim.SparseAdam([w], lr=1e-3)
    grad = torch.sparse_coo_tensor(idx.unsqueeze(0), vals, (rows, cols))
    clock = time.process_time if cpu else time.perf_counter
    times = []
    for r in range(runs + 1):
        w.grad = grad.clone()
        t0 = clock()
        opt.step()
        if r:
            times.append(clock() - t0)
    return statistics.median(times)


def sparse_once(args, rows):
    """Each config, then SparseAdam right after it (the load of a shared
    machine drifts: each ratio compares neighbouring measurements)."""
    cols, n = args.sparse[1], args.sparse[2]
    idx, vals = sparse_work(rows, cols, n)
    clock = "CPU time" if args.cpu else "wall clock"
    print(f"sparse: {rows} x {cols} float32, {n} indices, {args.threads} threads, median of {args.runs}, {clock}")
    print(f"{'optim config':<84} {'optim ms':>9} {'torch ms':>9} {'torch/optim':>11} {'dense ms':>9} "
          f"{'sparse/dense':>12}")
    times = {}
    for config in SPARSE_CONFIGS:
        r = optim_bench(args, ["--sparse", str(rows), str(cols), str(n)], [config])[0]
        peer = torch_sparse_adam(rows, cols, idx, vals, args.runs, args.cpu)
        s = r["cpu_median_seconds" if args.cpu else "median_seconds"]
        d = r["dense_median_seconds"]  # sparse/dense: both wall clock
        print(f"{config:<84} {1e3 * s:9.3f} {1e3 * peer:9.3f} {peer / s:11.2f} {1e3 * d:9.2f} "
              f"{r['median_seconds'] / d:12.3f}", flush=True)
        times[config] = s
    return times


def torch_adam(n, k, runs, foreach):
    """Median seconds of a torch.optim.Adam step on n float32 parameters in
    k tensors, after a warm-up step."""
    sizes = [n // k + (1 if j < n % k else 0) for j in range(k)]
    params = [torch.zeros(s, dtype=torch.float32, requires_grad=True) for s in sizes]
    for p in params:
        p.grad = torch.full_like(p, 1e-3)
    opt = torch.optim.Adam(params, lr=1e-3, foreach=foreach)
    times = []
    with torch.no_grad():
        for r in range(runs + 1):
            t0 = time.perf_counter()
            opt.step()
            if r:
                times.append(time.perf_counter() - t0)
    return statistics.median(times)


def compare_dense(args):
    config = '{"class_name": "Adam", "config": {"epsilon": 1e-8}}'
    print(f"dense: Adam float32, {args.size} parameters, {args.threads} threads, median of {args.runs}")
    print(f"{'tensors':>8} {'optim ms':>9} {'x triad':>7} {'for-loop ms':>11} {'for/optim':>9} "
          f"{'foreach ms':>10} {'foreach/optim':>13}")
    for k in args.tensors:
        r = optim_bench(args, ["--size", str(args.size), "--tensors", str(k)], [config])[0]
        loop = torch_adam(args.size, k, args.runs, foreach=False)
        each = torch_adam(args.size, k, args.runs, foreach=True)
        s = r["median_seconds"]
        print(f"{k:8d} {1e3 * s:9.3f} {r['ratio']:7.2f} {1e3 * loop:11.3f} {loop / s:9.2f} "
              f"{1e3 * each:10.3f} {each / s:13.2f}", flush=True)


def compare_sparse(args):
    base = sparse_once(args, args.sparse[0])
    if not args.double:
        return
    doubled = sparse_once(args, 2 * args.sparse[0])
    print("time on 2 x rows / time on rows:")
    for config, secs in base.items():
        print(f"{config:<84} {doubled[config] / secs:6.2f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--optim", default="build/optim")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--sparse", type=int, nargs=3, metavar=("ROWS", "COLS", "INDICES"),
                   default=[1000000, 64, 4096])
    p.add_argument("--double", action="store_true", help="also on twice the rows")
    p.add_argument("--cpu", action="store_true", help="sparse: compare CPU time, not wall time")
    p.add_argument("--size", type=int, default=10000000, help="dense: parameters")
    p.add_argument("--tensors", type=int, nargs="+", default=[1, 10000], help="dense: tensor counts")
    p.add_argument("comparisons", nargs="*", default=list(COMPARISONS), help="sparse, dense")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.comparisons:
        if name not in COMPARISONS:
            p.error(f"unknown comparison {name!r} (known: {', '.join(COMPARISONS)})")
        COMPARISONS[name](args)
    return 0


COMPARISONS = {"sparse": compare_sparse, "dense": compare_dense}


if __name__ == "__main__":
    sys.exit(main())
