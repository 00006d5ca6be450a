#!/usr/bin/env python3
"""Writes a reference trajectory for `optim conformance CLASS --reference REF`.

You write the update rule once, in Python, as the paper or Keras states it:

    def step(params, grads, state, t, config):
        ...

  params  dict NAME -> float64 numpy array: the variables before the step;
          update them in place (or return a dict NAME -> new array).
  grads   dict NAME -> float64 numpy array, the gradient of each variable
          at this step. A sparse gradient arrives as its dense equivalent
          (duplicate rows summed, other rows zero); grads.indices[NAME] then
          holds its rows (sorted, unique), for a lazy rule that must leave
          the other rows alone.
  state   a dict of your own, empty before step 1 and kept between steps
          (your slots: state.setdefault(("m", name), np.zeros_like(p))).
  t       the step number, 1, 2, ... (Keras's iterations + 1 inside the step).
  config  the --config object (a dict, {} without --config): read your
          hyperparameters from it, with the class's defaults for missing
          keys. Optional: a step taking four arguments is called without it,
          and one whose fifth has a default keeps it unless --config is given.

The script makes seeded variables (a scalar, a vector, a matrix) and
gradients for --steps steps, runs your step in float64 on the numbers the
class will see (rounded to --dtype first), and writes one safetensors file:

  init/NAME                        the variables, in --dtype
  grads/K/NAME                     dense gradient of step K (0-based), or
  grads/K/NAME/indices, /values    a sparse one (--sparse: the matrix's)
  expect/NAME                      your variables after the last step (F64)
  __metadata__                     rtol, atol, config (strings)

Then `optim conformance CLASS --reference REF` steps the class through the
same gradients and compares, element by element, |got - expected| <= atol +
rtol * |expected|. Pick hyperparameters that make every term of the rule
matter (a large epsilon, say 1e-3): with the defaults an epsilon in the wrong
place moves the result by less than float32 can show.

Usage:
  make_reference.py OUT.safetensors --step my_rule.py:step [options]
  make_reference.py OUT.safetensors --example adam [options]

Options:
  --step FILE.py:FUNC   your step function (FUNC defaults to "step")
  --example adam        the Adam reference below (Keras 3's formula)
  --config JSON         hyperparameters, passed to the step and stored in REF
                        (optim conformance uses them unless given --config)
  --dtype f32|f64       dtype of the variables and gradients (default f32)
  --steps N             number of steps (default 5)
  --seed S              seed of the values and gradients (default 1)
  --sparse              the matrix gets sparse gradients (with a repeated row)
  --rtol X --atol Y     tolerances (default 1e-5 and 1e-6 for f32, 1e-10 and
                        1e-12 for f64)

Needs numpy only; it writes safetensors itself (8-byte little-endian header
size, JSON header, data).
"""
import argparse
import importlib.util
import inspect
import json
import struct
import sys

import numpy as np


def adam(params, grads, state, t, config):
    """Adam as Keras 3 computes it (keras/src/optimizers/adam.py's formula):
    m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2);
    w -= lr sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) + epsilon)."""
    lr = config.get("learning_rate", 0.001)
    b1 = config.get("beta_1", 0.9)
    b2 = config.get("beta_2", 0.999)
    eps = config.get("epsilon", 1e-7)
    alpha = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
    for name, w in params.items():
        g = grads.get(name)
        if g is None:
            continue
        m = state.setdefault(("m", name), np.zeros_like(w))
        v = state.setdefault(("v", name), np.zeros_like(w))
        m += (g - m) * (1 - b1)
        v += (g * g - v) * (1 - b2)
        w -= alpha * m / (np.sqrt(v) + eps)


EXAMPLES = {"adam": adam}
SHAPES = {"scalar": (), "vector": (7,), "matrix": (6, 4)}
ST_DTYPES = {
    np.dtype(np.float16): "F16",
    np.dtype(np.float32): "F32",
    np.dtype(np.float64): "F64",
    np.dtype(np.int64): "I64",
}


class Grads(dict):
    """The gradients of one step; .indices names the rows of sparse ones."""

    def __init__(self):
        super().__init__()
        self.indices = {}


def load_step(spec):
    path, _, func = spec.partition(":")
    module_spec = importlib.util.spec_from_file_location("user_reference", path)
    if module_spec is None:
        sys.exit(f"make_reference.py: --step {spec}: {path} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    fn = getattr(module, func or "step", None)
    if not callable(fn):
        sys.exit(f"make_reference.py: --step {spec}: {path} has no function {func or 'step'}")
    return fn


def save_safetensors(path, tensors, metadata):
    """tensors: dict name -> numpy array (F16, F32, F64 or I64), written sorted."""
    header = {"__metadata__": metadata}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        data = a.tobytes()
        header[name] = {
            "dtype": ST_DTYPES[a.dtype.newbyteorder("=")],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def make_grads(rng, k, dtype, sparse, tensors):
    """Step k's gradients into tensors, and as float64 for the step."""
    grads = Grads()
    for name, shape in SHAPES.items():
        if sparse and name == "matrix":
            rows = rng.integers(0, shape[0], size=3)
            rows = np.append(rows, rows[0])  # a repeated row: the rows sum
            values = rng.uniform(-1, 1, size=(len(rows),) + shape[1:]).astype(dtype)
            tensors[f"grads/{k}/{name}/indices"] = rows.astype(np.int64)
            tensors[f"grads/{k}/{name}/values"] = values
            dense = np.zeros(shape)
            np.add.at(dense, rows, values.astype(np.float64))
            grads[name] = dense
            grads.indices[name] = np.unique(rows)
        else:
            g = np.asarray(rng.uniform(-1, 1, size=shape), dtype=dtype)
            tensors[f"grads/{k}/{name}"] = g
            grads[name] = np.array(g, dtype=np.float64)
    return grads


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--step")
    p.add_argument("--example", choices=sorted(EXAMPLES))
    p.add_argument("--config")
    p.add_argument("--dtype", choices=["f32", "f64"], default="f32")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sparse", action="store_true")
    p.add_argument("--rtol", type=float)
    p.add_argument("--atol", type=float)
    a = p.parse_args()
    if (a.step is None) == (a.example is None):
        p.error("give one of --step FILE.py:FUNC and --example NAME")
    if a.steps < 1:
        p.error("--steps must be at least 1")
    step = load_step(a.step) if a.step else EXAMPLES[a.example]
    a.config_given = a.config is not None
    config = json.loads(a.config if a.config_given else "{}")
    if not isinstance(config, dict):
        p.error("--config must be a JSON object")
    # config goes to a step taking a fifth argument, unless that argument has
    # a default of its own and no --config was given.
    params5 = list(inspect.signature(step).parameters.values())[4:5]
    takes_config = bool(params5) and (
        params5[0].default is inspect.Parameter.empty or a.config_given
    )
    dtype = np.float32 if a.dtype == "f32" else np.float64
    rtol = a.rtol if a.rtol is not None else (1e-5 if a.dtype == "f32" else 1e-10)
    atol = a.atol if a.atol is not None else (1e-6 if a.dtype == "f32" else 1e-12)

    rng = np.random.default_rng(a.seed)
    tensors = {}
    params = {}
    for name, shape in SHAPES.items():
        init = np.asarray(rng.uniform(-1, 1, size=shape), dtype=dtype)
        tensors[f"init/{name}"] = init
        params[name] = np.array(init, dtype=np.float64)
    state = {}
    for k in range(a.steps):
        grads = make_grads(rng, k, dtype, a.sparse, tensors)
        args = (params, grads, state, k + 1) + ((config,) if takes_config else ())
        new = step(*args)
        if new is not None:
            params = {n: np.asarray(v, dtype=np.float64) for n, v in new.items()}
    for name in SHAPES:
        tensors[f"expect/{name}"] = np.asarray(params[name], dtype=np.float64).reshape(SHAPES[name])
    metadata = {
        "rtol": repr(rtol),
        "atol": repr(atol),
        "config": json.dumps(config),
        "generator": "tools/make_reference.py " + (a.step or "--example " + a.example),
    }
    save_safetensors(a.out, tensors, metadata)


if __name__ == "__main__":
    main()
