"""The rest of the API: variable names, Variables, half-precision storage
(float16, and bfloat16 as uint16 bits) bit for bit against `optim replay`,
get_weights / set_weights resuming exactly, hyperparameters as attributes,
iterations, wrappers, plugins, conformance, set_num_threads."""
import glob
import json
import os

import numpy as np
import pytest

import optim
from conftest import BUILD, read_st, run_cli, write_st


def test_plain_arrays_are_named_in_first_seen_order():
    opt = optim.SGD(learning_rate=0.1, momentum=0.9)
    a, b, c = np.zeros(2, np.float32), np.zeros(3, np.float32), np.zeros(4, np.float32)
    opt.apply_gradients([(np.ones(3, np.float32), b), (np.ones(2, np.float32), a)])
    opt.apply_gradients([(np.ones(2, np.float32), a), (np.ones(4, np.float32), c),
                         (None, b)])
    assert [v.name for v in opt.variables] == ["variable", "variable_1", "variable_2"]
    assert opt.variables[0].array is b and opt.variables[2].shape == (4,)
    assert opt.weight_names == ["iterations", "variable/momentum", "variable_1/momentum",
                                "variable_2/momentum"]
    # A new view of the same memory (torch.Tensor.numpy() made afresh) is the same variable.
    before = a.copy()
    opt.apply_gradients([(np.ones(2, np.float32), a[...])])
    assert len(opt.variables) == 3 and not np.array_equal(a, before)


def test_variable():
    w = np.zeros((2, 3))
    v = optim.Variable(w, name="dense/kernel")
    assert (v.name, v.shape, v.dtype, v.trainable, v.array is w) == \
        ("dense/kernel", (2, 3), "float64", True, True)
    opt = optim.Adam()
    opt.apply_gradients([(np.ones((2, 3)), v)])
    assert opt.weight_names == ["iterations", "dense/kernel/m", "dense/kernel/v"]
    assert w[0, 0] != 0  # updated in place
    opt.apply_gradients([(np.ones((2, 3)), w)])  # the plain array is that variable
    assert len(opt.variables) == 1 and opt.iterations == 2
    assert "dense/kernel" in repr(v)


def test_apply_gradients_takes_any_sequence_and_returns_iterations():
    opt = optim.SGD()
    w = np.zeros(3)
    assert opt.apply_gradients(zip([np.ones(3)], [w])) == 1
    assert opt.apply_gradients([[np.ones(3), w]]) == 2


def test_sparse_gradients():
    e1, e2 = np.zeros((5, 2)), np.zeros((5, 2))
    o1, o2 = optim.Adagrad(learning_rate=0.1), optim.Adagrad(learning_rate=0.1)
    rows = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    o1.apply_gradients([(optim.IndexedSlices(rows, np.array([3, 0, 3], np.int32)), e1)])
    o2.apply_gradients([(optim.IndexedSlices(rows.tolist(), [3, 0, 3], dense_shape=(5, 2)), e2)])
    assert np.array_equal(e1, e2) and e1[1].tolist() == [0.0, 0.0] and e1[3, 0] < 0
    s = optim.IndexedSlices(rows, [0, 1, 2], (5, 2))
    assert s.values is rows and s.dense_shape == (5, 2) and s.indices.dtype == np.int64


HALF = {"F16": (np.float16, np.float16, None), "BF16": (np.uint16, None, "bfloat16")}


def to_bf16_bits(x):
    """float64 -> bfloat16 bits, rounded to nearest even (as optim_convert)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


@pytest.mark.parametrize("st", ["F16", "BF16"])
@pytest.mark.parametrize("config", ['{"class_name": "Adam", "config": {"learning_rate": 0.01}}',
                                    '{"class_name": "SGD", "config": {"learning_rate": 0.1, '
                                    '"momentum": 0.9, "is_legacy_optimizer": true}}'])
def test_half_precision_equals_replay(st, config, tmp_path, cli):
    npdt, _, vdtype = HALF[st]
    conv = (lambda x: np.asarray(x, np.float16)) if st == "F16" else to_bf16_bits
    w0 = conv(np.linspace(-1, 1, 24).reshape(4, 6))
    grads = [conv(np.sin(np.arange(24) * 0.3 + k).reshape(4, 6)) for k in range(4)]
    t = (lambda a: (a, "BF16")) if st == "BF16" else (lambda a: a)
    (tmp_path / "c.json").write_text(config)
    write_st(tmp_path / "i.st", {"w": t(w0)})
    write_st(tmp_path / "g.st", {"%d/w" % k: t(g) for k, g in enumerate(grads)})
    run_cli("replay", *(str(tmp_path / n) for n in ("c.json", "i.st", "g.st", "o.st")))
    out = read_st(tmp_path / "o.st")
    w = w0.copy()
    v = optim.Variable(w, name="w", dtype=vdtype)
    assert v.dtype == ("float16" if st == "F16" else "bfloat16")
    opt = optim.from_config(config)
    for g in grads:
        opt.apply_gradients([(g, v)])
    assert w.tobytes() == out["w"].tobytes()
    for name, a in zip(opt.weight_names, opt.get_weights()):
        assert a.tobytes() == out[name].tobytes(), name


def test_weights_resume_exactly():
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(6)]
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    w = w0.copy()
    full = optim.Nadam(learning_rate=0.01)
    for g in grads:
        full.apply_gradients([(g, w)])
    half_w = w0.copy()
    half = optim.Nadam(learning_rate=0.01)
    for g in grads[:3]:
        half.apply_gradients([(g, half_w)])
    saved = [a.copy() for a in half.get_weights()]
    assert saved[0] == 3 and half.weight_names[0] == "iterations"
    r = np.zeros((3, 4), np.float32)
    resumed = optim.Nadam(learning_rate=0.01)
    resumed.build([r])
    assert resumed.weight_names == half.weight_names
    resumed.set_weights(saved)
    r[...] = half_w
    assert resumed.iterations == 3
    for g in grads[3:]:
        resumed.apply_gradients([(g, r)])
    assert r.tobytes() == w.tobytes()
    assert [a.tobytes() for a in resumed.get_weights()] == \
        [a.tobytes() for a in full.get_weights()]
    resumed.set_weights([3] + saved[1:])  # a plain int for iterations
    assert resumed.iterations == 3
    with pytest.raises(optim.Error, match="unknown"):
        resumed.apply_gradients([(np.ones(2, np.float32), np.zeros(2, np.float32))])
    assert len(resumed.variables) == 1  # the refused variable was not kept


def test_hyperparameters_iterations_and_learning_rate():
    opt = optim.Adam(learning_rate=0.01, beta_1=0.8)
    assert opt.beta_1 == 0.8 and opt.epsilon == 1e-07 and opt.learning_rate == 0.01
    opt.beta_1 = 0.7
    opt.learning_rate = 0.02
    cfg = opt.get_config()
    assert cfg["beta_1"] == 0.7 and cfg["learning_rate"] == 0.02
    opt.clipnorm = 1.0
    assert opt.get_config()["clipnorm"] == 1.0
    opt.clipnorm = None
    assert opt.get_config()["clipnorm"] is None and opt.clipnorm is None
    opt.iterations = 10
    assert opt.iterations == 10
    opt.some_attribute = 5  # not a key: a Python attribute
    assert opt.some_attribute == 5 and "some_attribute" not in opt.get_config()
    assert opt.name == "adam" and opt.class_name == "Adam" and "adam" in repr(opt)


def test_keras3_options_through_python():
    w = np.ones(4)
    opt = optim.SGD(learning_rate=0.5, use_ema=True, ema_momentum=0.5)
    for _ in range(3):
        opt.apply_gradients([(np.ones(4), w)])
    assert opt.weight_names == ["iterations", "variable/average"]
    average = opt.get_weights()[1].copy()
    opt.finalize_variable_values()
    assert np.array_equal(w, average)


def test_wrapper_steps():
    la = optim.Lookahead(optim.SGD(learning_rate=0.1), sync_period=2, slow_step_size=0.5)
    w = np.zeros(3)
    for _ in range(2):
        la.apply_gradients([(np.ones(3), w)])
    # two fast steps of -0.1, then halfway back to the slow weights (0)
    assert np.allclose(w, -0.1)
    assert "variable/slow" in la.weight_names


def test_set_num_threads_keeps_the_bits():
    rng = np.random.default_rng(3)
    g = rng.standard_normal(200_000).astype(np.float32)
    out = []
    for n in (1, 2, 0):
        optim.set_num_threads(n)
        w = np.ones(200_000, np.float32)
        opt = optim.Lamb(learning_rate=0.01)
        for _ in range(3):
            opt.apply_gradients([(g, w)])
        out.append(w.tobytes())
    assert out[0] == out[1] == out[2]
    with pytest.raises(optim.Error):
        optim.set_num_threads(-1)


def test_conformance():
    passed, failed, lines = optim.conformance("SGD", config={"momentum": 0.9})
    assert passed > 10 and failed == 0 and len(lines) >= passed
    assert all(line.split()[0] in ("PASS", "SKIP") for line in lines)
    p, f, lines = optim.conformance("Adam", generation="legacy", group="config")
    assert p > 0 and f == 0 and all("config" in line or "class" in line for line in lines)
    with pytest.raises(optim.Error, match="NoSuchClass"):
        optim.conformance("NoSuchClass")


def test_load_plugin(tmp_path):
    lib = os.path.join(BUILD, "libadabelief.so")
    if not os.path.exists(lib):
        pytest.skip("no example plugin at %s" % lib)
    with pytest.raises(optim.Error, match="give a path"):
        optim.load_plugin("libadabelief.so")
    with pytest.raises(optim.Error, match="cannot open"):
        optim.load_plugin(str(tmp_path / "missing.so"))
    assert optim.load_plugin(lib) is True
    assert optim.load_plugin(lib) is False  # once
    opt = optim.AdaBelief(learning_rate=0.01)
    w = np.zeros(3, np.float32)
    opt.apply_gradients([(np.ones(3, np.float32), w)])
    assert w[0] < 0 and isinstance(optim.from_config(optim.serialize(opt)), optim.AdaBelief)
    p, f, _ = optim.conformance("AdaBelief", group="config")
    assert p > 0 and f == 0
    bad = glob.glob(os.path.join(BUILD, "libbad_init_fails.so"))
    if bad:
        with pytest.raises(optim.Error, match="failed"):
            optim.load_plugin(bad[0])
        # Again: it stays open (it may have registered classes), and says so
        # rather than answering "loaded before".
        with pytest.raises(optim.Error, match="failed when it was first loaded"):
            optim.load_plugin(bad[0])


def test_a_non_finite_keyword_is_named():
    for value in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(optim.Error, match=r"Adam: config\.learning_rate is .*expected a "
                                              r"finite number"):
            optim.Adam(learning_rate=value)
    with pytest.raises(optim.Error, match=r"config\.learning_rate\.config\.decay_steps"):
        optim.SGD(learning_rate={"class_name": "CosineDecay", "config": {
            "initial_learning_rate": 0.1, "decay_steps": float("nan")}})


def test_get_config_is_json_and_serialize_round_trips():
    opt = optim.AdamW(learning_rate=optim.schedules.PolynomialDecay(0.1, 100), weight_decay=0.1)
    text = json.dumps(opt.get_config())
    again = optim.AdamW.from_config(json.loads(text))
    assert again.get_config() == opt.get_config()
