"""Steps through the Python package equal `optim replay`, bit for bit, on
every config of the replay set: the same inputs as tests/test_replay_all.c
(a dense float32 [40, 33] kernel, a sparse float64 [6, 35] embedding with
repeated indices, a float64 scalar with a gradient every other step), and
every variable, slot and weight of OUT compared byte for byte."""
import json
import math

import numpy as np
import pytest

import optim
from conftest import read_st, replay_configs, run_cli, write_st

STEPS, KR, KC, EC = 6, 40, 33, 35
CONFIGS = replay_configs()


def inputs():
    init = {
        "bias": np.array(0.5, np.float64),
        "dense/kernel": np.array([0.001 * i - 0.4 for i in range(KR * KC)],
                                 np.float32).reshape(KR, KC),
        "emb": np.array([0.01 * i - 1.0 for i in range(6 * EC)], np.float64).reshape(6, EC),
    }
    grads = []
    for k in range(STEPS):
        g = {"dense/kernel": np.array([math.sin(0.9 * k + 0.37 * i) for i in range(KR * KC)],
                                      np.float32).reshape(KR, KC),
             "emb/indices": np.array([(k * 2) % 6, 5, (k * 2) % 6, (k + 1) % 6], np.int64),
             "emb/values": np.array([math.cos(0.7 * k + 1.1 * j + 0.3 * c)
                                     for j in range(4) for c in range(EC)],
                                    np.float64).reshape(4, EC)}
        if k % 2 == 0:
            g["bias"] = np.array(0.25 * (k - 2), np.float64)
        grads.append(g)
    return init, grads


# Classes that refuse sparse gradients (TF Addons' COCOB): their "emb" gets
# the dense equivalent, as in tests/test_replay_all.c.
NO_SPARSE = {c[0].lower() for c in optim._optim._classes() if c[5]}


def dense_equivalent(g):
    """g with "emb" as the dense [6, EC] sum of its rows."""
    out = {n: a for n, a in g.items() if not n.startswith("emb/")}
    emb = np.zeros((6, EC), np.float64)
    for j, i in enumerate(g["emb/indices"]):
        emb[i] += g["emb/values"][j]
    out["emb"] = emb
    return out


def class_of(config):
    name = json.loads(config)["class_name"]
    return name[len("Addons>"):] if name.startswith("Addons>") else name


def test_the_set_is_read():
    assert len(CONFIGS) >= 60
    assert "cocob" in NO_SPARSE and "adam" not in NO_SPARSE
    assert all(json.loads(c)["class_name"] for c in CONFIGS)


@pytest.mark.parametrize("config", CONFIGS, ids=["%d" % (i + 1) for i in range(len(CONFIGS))])
def test_bitwise_equal_to_replay(config, tmp_path, cli):
    init, grads = inputs()
    dense_emb = class_of(config).lower() in NO_SPARSE
    if dense_emb:
        grads = [dense_equivalent(g) for g in grads]
    (tmp_path / "cfg.json").write_text(config)
    write_st(tmp_path / "init.st", init)
    write_st(tmp_path / "grads.st", {"%d/%s" % (k, n): a for k, g in enumerate(grads)
                                     for n, a in g.items()})
    run_cli("replay", str(tmp_path / "cfg.json"), str(tmp_path / "init.st"),
            str(tmp_path / "grads.st"), str(tmp_path / "out.st"))
    out = read_st(tmp_path / "out.st")

    opt = optim.from_config(json.loads(config))
    arrays = {n: a.copy() for n, a in init.items()}
    variables = [optim.Variable(arrays[n], name=n) for n in sorted(arrays)]
    for g in grads:
        emb = g["emb"] if dense_emb else optim.IndexedSlices(g["emb/values"], g["emb/indices"])
        opt.apply_gradients([(g.get("bias"), variables[0]),
                             (g["dense/kernel"], variables[1]), (emb, variables[2])])
    mine = dict(arrays)
    mine.update(zip(opt.weight_names, opt.get_weights()))
    assert sorted(mine) == sorted(out)
    for name, want in out.items():
        got = mine[name]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert got.tobytes() == want.tobytes(), "%s differs from optim replay" % name
