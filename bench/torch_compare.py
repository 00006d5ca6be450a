#!/usr/bin/python3
"""optim against PyTorch (Debian's python3-torch) on the same work, in one run.

    OMP_NUM_THREADS=2 bench/torch_compare.py [--optim build/optim] [--threads 2]
        [--runs 7] [--size N] [--tensors K ...]

One function per comparison, each printing one line per case with both
median step times and their ratio (torch time / optim time: above 1 means
optim is faster), or one JSON object per case with --json.

compare_dense_adam: a float32 Adam step (PyTorch's defaults: lr 1e-3,
betas 0.9/0.999, eps 1e-8; optim's Keras 3 Adam with epsilon 1e-8) on N
parameters split into K tensors, for each K given: `optim bench --tensors K`
against torch.optim.Adam with its for-loop (foreach=False) and with
foreach=True (its multi-tensor kernels), all on the same thread count.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

import torch


def optim_bench(args, config, extra):
    """The JSON line of `optim bench` for one config and its extra options."""
    cmd = [args.optim, "bench", "--json", "--runs", str(args.runs), "--threads",
           str(args.threads)] + extra + [config]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def median_step(step, runs):
    """Median seconds of `runs` calls of step() after one warm-up call."""
    step()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def torch_adam(n, k, runs, foreach):
    """Median seconds of one torch.optim.Adam step on n float32 parameters in k tensors."""
    sizes = [n // k + (1 if j < n % k else 0) for j in range(k)]
    params = [torch.zeros(s, dtype=torch.float32, requires_grad=True) for s in sizes]
    for p in params:
        p.grad = torch.full_like(p, 1e-3)
    opt = torch.optim.Adam(params, lr=1e-3, foreach=foreach)
    with torch.no_grad():
        return median_step(opt.step, runs)


def compare_dense_adam(args):
    config = '{"class_name": "Adam", "config": {"epsilon": 1e-8}}'
    for k in args.tensors:
        ours = optim_bench(args, config, ["--size", str(args.size), "--tensors", str(k)])
        t_loop = torch_adam(args.size, k, args.runs, foreach=False)
        t_foreach = torch_adam(args.size, k, args.runs, foreach=True)
        mine = ours["median_seconds"]
        row = {"comparison": "dense_adam", "elements": args.size, "tensors": k,
               "threads": args.threads, "optim_seconds": mine, "optim_ratio_to_triad": ours["ratio"],
               "torch_forloop_seconds": t_loop, "torch_foreach_seconds": t_foreach,
               "forloop_over_optim": t_loop / mine, "foreach_over_optim": t_foreach / mine}
        if args.json:
            print(json.dumps(row))
        else:
            print(f"Adam f32, {args.size} params in {k} tensors, {args.threads} threads: "
                  f"optim {mine * 1e3:.3f} ms ({ours['ratio']:.2f} x triad), "
                  f"torch for-loop {t_loop * 1e3:.3f} ms ({t_loop / mine:.2f}x), "
                  f"torch foreach {t_foreach * 1e3:.3f} ms ({t_foreach / mine:.2f}x)")
        sys.stdout.flush()


COMPARISONS = {"dense_adam": compare_dense_adam}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--optim", default="build/optim")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--size", type=int, default=1 << 24)
    ap.add_argument("--tensors", type=int, nargs="+", default=[1, 100, 10000])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("comparisons", nargs="*", default=list(COMPARISONS),
                    help="which comparisons to run (default: all): " + ", ".join(COMPARISONS))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.comparisons:
        if name not in COMPARISONS:
            ap.error(f"unknown comparison {name!r}")
        COMPARISONS[name](args)


if __name__ == "__main__":
    main()
