#!/usr/bin/env python3
"""`optim replay` outputs, recorded once and compared bit for bit later.

For a refactoring that must not change results: record the OUT of every
config of tests/test_replay_all.c (and a few nested wrappers) with the
command built before the change, then compare with the one built after.

    scripts/replay_bitwise.py record  OLD/optim DIR
    scripts/replay_bitwise.py compare NEW/optim DIR

The inputs (INIT, GRADS: a dense f32 [4, 3], a sparse f64 [6, 2] with
duplicate indices, a scalar f64 every other step) are written by this script
in DIR. `compare` exits 1 and names each config whose OUT differs.
"""
import ast
import hashlib
import json
import math
import os
import re
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 6

# Nested wrappers whose results must not change either.
EXTRA = [
    '{"class_name": "MovingAverage", "config": {"optimizer": {"class_name": "Lookahead", "config": '
    '{"optimizer": {"class_name": "Adam", "config": {"learning_rate": 0.01}}, "sync_period": 2}}, '
    '"average_decay": 0.8}}',
    '{"class_name": "LossScaleOptimizer", "config": {"inner_optimizer": {"class_name": "ApplyIfFinite", '
    '"config": {"inner_optimizer": {"class_name": "Adam", "config": {"learning_rate": 0.01, '
    '"use_ema": true}}}}, "initial_scale": 8.0, "dynamic_growth_steps": 2}}',
    '{"class_name": "SWA", "config": {"optimizer": {"class_name": "Lookahead", "config": {"optimizer": '
    '{"class_name": "SGD", "config": {"learning_rate": 0.1, "momentum": 0.9}}, "sync_period": 3}}, '
    '"average_period": 2, "clipvalue": 0.5}}',
    '{"class_name": "Lookahead", "config": {"optimizer": {"class_name": "Adam", "config": '
    '{"learning_rate": 0.01, "gradient_accumulation_steps": 2, "use_ema": true}}, "sync_period": 2}}',
    '{"class_name": "MovingAverage", "config": {"optimizer": {"class_name": "MultiOptimizer", "config": '
    '{"optimizer_map": {"class_name": "OptimizerMap", "config": {"default_optimizer": "sgd", '
    '"optimizer_map": {"emb": "adam"}}}}}}}',
]


def configs():
    text = ""
    for f in ("tests/test_replay_all.c", "tests/replay_configs.inc"):
        with open(os.path.join(ROOT, f)) as fh:
            text += fh.read()
    start = text.index("CONFIGS[] = {")
    out = []
    for line in text[start:].splitlines():
        m = re.match(r'\s*("(?:[^"\\]|\\.)*"),\s*$', line)
        if m:
            out.append(ast.literal_eval(m.group(1)))
    return out + EXTRA


DT = {"F32": ("f", 4), "F64": ("d", 8), "I64": ("q", 8)}


def write_st(path, tensors):
    header, blobs, off = {}, [], 0
    for name, (dtype, shape, values) in tensors.items():
        fmt, size = DT[dtype]
        data = struct.pack("<%d%s" % (len(values), fmt), *values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write_inputs(d):
    write_st(os.path.join(d, "init.st"), {
        "bias": ("F64", [], [0.5]),
        "dense/kernel": ("F32", [4, 3], [0.1 * i - 0.4 for i in range(12)]),
        "emb": ("F64", [6, 2], [0.2 * i - 1.0 for i in range(12)]),
    })
    g = {}
    for k in range(STEPS):
        g["%d/dense/kernel" % k] = ("F32", [4, 3], [math.sin(0.9 * k + 0.37 * i) for i in range(12)])
        idx = [(k * 2) % 6, 5, (k * 2) % 6, (k + 1) % 6]
        g["%d/emb/indices" % k] = ("I64", [4], idx)
        g["%d/emb/values" % k] = ("F64", [4, 2],
                                  [math.cos(0.7 * k + 1.1 * j + 0.3 * c) for j in range(4) for c in range(2)])
        if k % 2 == 0:
            g["%d/bias" % k] = ("F64", [], [0.25 * (k - 2)])
    write_st(os.path.join(d, "grads.st"), g)


def key(cfg):
    return hashlib.sha1(cfg.encode()).hexdigest()[:12]


def replay(optim, d, cfg, suffix):
    cpath = os.path.join(d, "cfg-%s.json" % key(cfg))
    with open(cpath, "w") as fh:
        fh.write(cfg)
    out = os.path.join(d, "out-%s.%s" % (key(cfg), suffix))
    if os.path.exists(out):
        os.unlink(out)
    r = subprocess.run([optim, "replay", cpath, os.path.join(d, "init.st"), os.path.join(d, "grads.st"), out],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return out, r.returncode, r.stderr.strip()


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("record", "compare"):
        sys.exit(__doc__)
    mode, optim, d = sys.argv[1:]
    os.makedirs(d, exist_ok=True)
    write_inputs(d)
    bad = 0
    for i, cfg in enumerate(configs()):
        if mode == "record":
            _, rc, msg = replay(optim, d, cfg, "old")
            if rc:
                print("record: config %d failed (%s): %s" % (i, msg, cfg))
                bad += 1
            continue
        old = os.path.join(d, "out-%s.old" % key(cfg))
        new, rc, msg = replay(optim, d, cfg, "new")
        if rc or not os.path.exists(old):
            print("config %d: %s: %s" % (i, "no recorded OUT" if not rc else msg, cfg))
            bad += 1
            continue
        with open(old, "rb") as a, open(new, "rb") as b:
            if a.read() != b.read():
                print("config %d: OUT differs: %s" % (i, cfg))
                bad += 1
    print("%s: %d configs, %d bad" % (mode, len(configs()), bad))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
