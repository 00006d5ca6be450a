#!/usr/bin/python3
"""Fashion-MNIST with a PyTorch MLP, stepped by optim's Adam or by torch's.

    PYTHONPATH=build/python examples/python/torch_mlp.py [--optimizer optim|torch]
        [--epochs 10] [--batch-size 128] [--lr 1e-3] [--seed 0] [--threads T]
        [--data /usr/share/datasets/fashion-mnist] [--train-limit N]

The 784-256-128-10 MLP (ReLU) trained with cross-entropy on the 60,000
training images, then evaluated on the 10,000 test images. The optimizer is

  optim   optim.torch.Optimizer(model.parameters(), "adam", learning_rate=LR):
          Keras's Adam (epsilon 1e-7 added to sqrt(v), bias corrections folded
          into the step size), run by liboptim
  torch   torch.optim.Adam(model.parameters(), lr=LR) (epsilon 1e-8 added to
          the bias-corrected sqrt(v))

Everything else is the same for both: the seed gives the same initial weights
and the same batch order. Prints one line per epoch (mean training loss, time
spent in optimizer steps) and last `test_accuracy=P` (percent of the test
images classified correctly). The data are the gzip'd IDX files as
distributed (read with gzip and NumPy; Debian: dataset-fashion-mnist).
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """The array of a gzip'd IDX file (unsigned bytes, any number of dimensions)."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError("%s: not an IDX file of unsigned bytes (magic %02x%02x%02x%02x)"
                         % ((path,) + tuple(raw[:4])))
    dims = struct.unpack(">%dI" % ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError("%s: %d bytes of data for dimensions %s" % (path, data.size, dims))
    return data.reshape(dims)


def load(data_dir, split):
    """Images as float32 rows in [0, 1] and labels as int64, of 'train' or 't10k'."""
    x = read_idx(os.path.join(data_dir, "%s-images-idx3-ubyte.gz" % split))
    y = read_idx(os.path.join(data_dir, "%s-labels-idx1-ubyte.gz" % split))
    x = torch.from_numpy(x.reshape(len(x), -1).astype(np.float32) / 255.0)
    return x, torch.from_numpy(y.astype(np.int64))


def make_optimizer(name, params, lr):
    if name == "optim":
        import optim.torch
        return optim.torch.Optimizer(params, "adam", learning_rate=lr)
    return torch.optim.Adam(params, lr=lr)


def accuracy(model, x, y):
    with torch.no_grad():
        return 100.0 * (model(x).argmax(1) == y).double().mean().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--optimizer", choices=("optim", "torch"), default="optim")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch's and optim's (0: default)")
    ap.add_argument("--data", default=DATA, help="directory of the four .gz files")
    ap.add_argument("--train-limit", type=int, default=0,
                    help="train on the first N images only (0: all)")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
        if a.optimizer == "optim":
            import optim
            optim.set_num_threads(a.threads)
    x, y = load(a.data, "train")
    xt, yt = load(a.data, "t10k")
    if a.train_limit > 0:
        x, y = x[:a.train_limit], y[:a.train_limit]

    torch.manual_seed(a.seed)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = make_optimizer(a.optimizer, model.parameters(), a.lr)
    order = torch.Generator().manual_seed(a.seed)
    loss_fn = torch.nn.CrossEntropyLoss()
    for epoch in range(1, a.epochs + 1):
        perm = torch.randperm(len(x), generator=order)
        total, batches, in_step = 0.0, 0, 0.0
        for i in range(0, len(x), a.batch_size):
            idx = perm[i:i + a.batch_size]
            opt.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            t = time.perf_counter()
            opt.step()
            in_step += time.perf_counter() - t
            total += loss.item()
            batches += 1
        print("epoch %d: loss %.4f, optimizer steps %.3f s, test accuracy %.2f%%"
              % (epoch, total / batches, in_step, accuracy(model, xt, yt)), flush=True)
    print("test_accuracy=%.2f" % accuracy(model, xt, yt))
    return 0


if __name__ == "__main__":
    sys.exit(main())
