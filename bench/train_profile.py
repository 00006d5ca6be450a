#!/usr/bin/env python3
"""Where the CPU time of an `optim train` step goes, by part of the step.

    bench/train_profile.py OPTIM [EPOCHS [FREQ]]

Runs `perf record -F FREQ --call-graph dwarf` on `OPTIM train --epochs
EPOCHS` (defaults 1 and 1999) with this process's environment (set
OMP_NUM_THREADS and OMP_WAIT_POLICY as for bench_train_gemm), then sorts
every CPU sample, of every thread, by the part of the step its call chain
belongs to, and prints a Markdown table of shares. Samples of loading the
data set and of evaluating the test set are left out: the shares are of
the training steps' CPU time. The call chain decides, first match wins:
BLAS (any frame in OpenBLAS), the optimizer step, kernel and libgomp
(thread hand-offs), gradient buffers zeroed (memset under the tape's
gradient allocation), the batch copied into the tape, loss, accuracy, the
tape's backward and forward element-wise work, the batch gather (row
copies in fit), other.

CPU shares, not wall time: on two threads the GEMMs and the optimizer run
on both, the rest on one, so a serial part costs about twice its share of
the wall time. Needs perf (linux-perf) and permission to profile one's own
processes (kernel.perf_event_paranoid <= 2)."""
import collections
import os
import subprocess
import sys
import tempfile

PARTS = [
    ("BLAS (sgemm kernel, packing, its threading)", lambda s, d, leaf: any("blas" in x for x in d)),
    ("optimizer step (Adam, one fused pass)",
     lambda s, d, leaf: has(s, "optim__mt_run", "optim_apply_gradients", "apply_dense", "optim_step")),
    ("kernel and libgomp (thread hand-offs, scheduling)",
     lambda s, d, leaf: "kernel" in d[0] or "libgomp" in d[0] or "sched_yield" in leaf),
    ("gradient buffers zeroed (memset)",
     lambda s, d, leaf: has(s, "optim__tape_grad", "optim__arena_calloc") and "memset" in leaf),
    ("batch copied into the tape", lambda s, d, leaf: has(s, "optim_tape_const", "optim__nn_const")),
    ("loss (softmax cross-entropy, mean)", lambda s, d, leaf: has(s, "optim_loss_call")),
    ("accuracy", lambda s, d, leaf: has(s, "optim_accuracy_update")),
    ("tape backward, element-wise (ReLU, bias sums, pass-through)", lambda s, d, leaf: has(s, "optim_tape_gradient")),
    ("tape forward, element-wise (bias add, ReLU)", lambda s, d, leaf: has(s, "optim__model_call")),
    ("batch gather (rows in shuffled order)", lambda s, d, leaf: "memcpy" in leaf or "memmove" in leaf),
    ("other (fit loop, callbacks, logs)", lambda s, d, leaf: True),
]
LEFT_OUT = ("optim_job_load", "load_split", "evaluate_run", "optim_model_evaluate")


def has(syms, *names):
    return any(x in names or x.split(".")[0] in names for x in syms)


def samples(text):
    """Each sample's call chain as (symbols, dsos), innermost first."""
    chain = None
    for line in text.splitlines():
        if not line.strip():
            if chain:
                yield chain
            chain = None
        elif not line[0].isspace():
            chain = ([], [])
        elif chain is not None:
            parts = line.strip().split(None, 1)
            if len(parts) < 2:
                continue
            sym, _, dso = parts[1].rpartition(" (")
            chain[0].append((sym or parts[1]).split("+0x")[0])
            chain[1].append(dso.rstrip(")") if sym else "?")
    if chain:
        yield chain


def main():
    if len(sys.argv) < 2 or len(sys.argv) > 4:
        sys.exit(__doc__.split("\n\n")[1])
    optim, epochs = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "1"
    freq = sys.argv[3] if len(sys.argv) > 3 else "1999"
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        subprocess.run(["perf", "record", "-q", "-F", freq, "--call-graph", "dwarf,16384", "-o", data, optim,
                        "train", "--epochs", epochs], check=True, stdout=subprocess.DEVNULL)
        text = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,ip,sym,dso"], check=True,
                              capture_output=True, text=True, errors="replace").stdout
    shares = collections.Counter()
    for syms, dsos in samples(text):
        if not syms or has(syms, *LEFT_OUT):
            continue
        shares[next(name for name, test in PARTS if test(syms, dsos, syms[0]))] += 1
    n = sum(shares.values())
    print(f"{n} CPU samples in the training steps (all threads)\n")
    print("| part of the step | share of its CPU samples |\n|---|---|")
    for name, _ in PARTS:
        print(f"| {name} | {100 * shares[name] / max(n, 1):.1f}% |")


if __name__ == "__main__":
    main()
