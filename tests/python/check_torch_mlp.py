#!/usr/bin/env python3
"""ctest python_torch_mlp: examples/python/torch_mlp.py, short, with both optimizers.

    check_torch_mlp.py EXAMPLE [EPOCHS] [TOLERANCE]     (PYTHONPATH holds build/python)

Runs the example for EPOCHS (default 1) epochs with --optimizer optim and with
--optimizer torch (the same seed, batch size 128, lr 1e-3) and fails unless
both print test_accuracy=, both reach 80% (an optimizer that does not train
stays near 10%) and they are within TOLERANCE points (default 1.0; after one
epoch they were 83.83 and 83.58 on the development machine). Exits 77
(skipped, with the reason) where torch, NumPy or the data are missing.
"""
import os
import re
import subprocess
import sys

DATA = "/usr/share/datasets/fashion-mnist"


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def run(example, which, epochs):
    cmd = [sys.executable, example, "--optimizer", which, "--epochs", str(epochs)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print("$ " + " ".join(cmd) + "\n" + p.stdout, end="")
    m = re.search(r"^test_accuracy=([0-9.]+)$", p.stdout, re.M)
    if p.returncode != 0 or not m:
        print("FAIL: %s exited %d without a test_accuracy= line" % (which, p.returncode))
        sys.exit(1)
    return float(m.group(1))


def main():
    example = sys.argv[1]
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    for module, package in (("numpy", "python3-numpy"), ("torch", "python3-torch")):
        try:
            __import__(module)
        except ImportError:
            skip("%s is not installed for %s (Debian: %s)" % (module, sys.executable, package))
    if not os.path.exists(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")):
        skip("no Fashion-MNIST in %s (Debian: apt-get install dataset-fashion-mnist)" % DATA)
    acc = {w: run(example, w, epochs) for w in ("optim", "torch")}
    diff = abs(acc["optim"] - acc["torch"])
    print("optim %.2f%%, torch %.2f%%: %.2f points apart (tolerance %.2f)"
          % (acc["optim"], acc["torch"], diff, tol))
    if min(acc.values()) < 80.0 or diff > tol:
        print("FAIL")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
