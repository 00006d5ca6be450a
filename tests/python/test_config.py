"""Every built-in from keyword arguments, its get_config equal to what
`optim check` prints for the same config: each line of
tests/conformance/builtins.txt (every class in each generation it has,
wrappers with their inner optimizer) and every config of the replay set
(every documented option); configs of both Keras generations in and out;
schedules."""
import json

import pytest

import optim
from conftest import builtin_lines, check_config, replay_configs

LINES = builtin_lines()


def ctor(class_name):
    name = class_name[len("Addons>"):] if class_name.startswith("Addons>") else class_name
    for n in (name, name.upper(), name.capitalize()):
        if n in optim.__all__:
            return getattr(optim, n)
    return next(getattr(optim, n) for n in optim.__all__ if n.lower() == name.lower())


@pytest.mark.parametrize("cls,gen,config", LINES, ids=["%s-%s-%d" % (c, g, i)
                                                       for i, (c, g, _) in enumerate(LINES)])
def test_builtin_from_keywords(cls, gen, config, tmp_path, cli):
    kwargs = dict(config)
    if gen == "legacy":
        kwargs["is_legacy_optimizer"] = True
    opt = getattr(optim, cls)(**kwargs)
    want = check_config(tmp_path, {"class_name": cls, "config": kwargs})
    assert opt.get_config() == want["config"]
    assert optim.serialize(opt) == want
    assert opt.is_legacy_optimizer == (gen == "legacy")
    assert isinstance(opt, getattr(optim, cls)) and isinstance(opt, optim.Optimizer)


def test_every_builtin_class_has_a_line_and_a_class():
    classes = [c[0] for c in optim._optim._classes()]
    assert {c for c, _, _ in LINES} >= set(classes[:len(classes)])
    for name in classes:
        assert issubclass(getattr(optim, name), optim.Optimizer)


@pytest.mark.parametrize("config", replay_configs())
def test_replay_config_from_keywords(config, tmp_path, cli):
    d = json.loads(config)
    opt = ctor(d["class_name"])(**d["config"])
    # Keywords carry no envelope (tf-keras 2.13+'s module, registered_name),
    # so nested objects are written as a config of the short form is.
    short = {"class_name": d["class_name"], "config": d["config"]}
    assert opt.get_config() == check_config(tmp_path, short)["config"]


@pytest.mark.parametrize("config", replay_configs())
def test_from_config_dict_and_text(config, tmp_path, cli):
    d = json.loads(config)
    want = check_config(tmp_path, d)
    for given in (d, config, json.dumps(d).encode()):
        opt = optim.from_config(given)
        assert optim.serialize(opt) == want
        assert type(opt).__name__.lower() == opt.class_name.lower()
    # serialize -> deserialize writes the same config back
    again = optim.deserialize(optim.serialize(optim.from_config(d)))
    assert optim.serialize(again) == want


def test_both_generations():
    legacy = optim.from_config({"class_name": "Adam", "config": {
        "name": "Adam", "learning_rate": 0.01, "decay": 0.0, "beta_1": 0.9, "beta_2": 0.999,
        "epsilon": 1e-07, "amsgrad": False}})  # as tf.keras 2.x legacy writes it
    assert legacy.is_legacy_optimizer and legacy.get_config()["decay"] == 0.0
    k3 = optim.from_config({"module": "keras.optimizers", "class_name": "Adam", "config": {
        "name": "adam", "learning_rate": 0.01, "use_ema": False}, "registered_name": None})
    assert not k3.is_legacy_optimizer and "use_ema" in k3.get_config()
    tfa = optim.from_config({"class_name": "Addons>LAMB", "config": {"learning_rate": 0.01}})
    assert tfa.is_legacy_optimizer and isinstance(tfa, optim.Lamb)
    assert optim.LAMB(learning_rate=0.01).get_config() == tfa.get_config()
    assert isinstance(optim.from_config("adam"), optim.Adam)
    assert isinstance(optim.get("rmsprop"), optim.RMSprop)
    assert optim.get(k3) is k3


def test_class_from_config_and_positional_learning_rate():
    opt = optim.Adam(0.05, beta_1=0.8)
    assert opt.get_config()["learning_rate"] == 0.05
    again = optim.Adam.from_config(opt.get_config())
    assert again.get_config() == opt.get_config()
    with pytest.raises(TypeError):
        optim.Adam(0.05, learning_rate=0.1)
    with pytest.raises(TypeError):
        optim.Adam(0.05, 0.9)


def test_wrappers_take_a_copy_of_their_inner_optimizer():
    inner = optim.Adam(learning_rate=0.01)
    la = optim.Lookahead(inner, sync_period=6)
    assert la.get_config()["optimizer"]["config"]["learning_rate"] == 0.01
    assert la.get_config()["sync_period"] == 6
    by_key = optim.Lookahead(optimizer=inner, sync_period=6)
    assert by_key.get_config() == la.get_config()
    assert optim.LossScaleOptimizer("sgd").get_config()["inner_optimizer"]["class_name"] == "SGD"
    import numpy as np
    inner.apply_gradients([(np.ones(2, np.float32), np.zeros(2, np.float32))])
    with pytest.raises(optim.Error, match="stepped already"):
        optim.Lookahead(inner)
    with pytest.raises(optim.Error, match="stepped already"):
        optim.Lookahead(optimizer=inner)


def test_schedules():
    s = optim.schedules.CosineDecay(0.1, 10, alpha=0.1, warmup_target=0.2, warmup_steps=4)
    cfg = s.get_config()
    assert (cfg["initial_learning_rate"], cfg["decay_steps"], cfg["alpha"]) == (0.1, 10, 0.1)
    assert cfg["warmup_target"] == 0.2 and cfg["warmup_steps"] == 4
    assert s(0) == 0.1 and s(4) == pytest.approx(0.2)
    assert optim.schedules.CosineDecay.from_config(cfg).get_config() == cfg
    back = optim.schedules.deserialize(optim.schedules.serialize(s))
    assert isinstance(back, optim.schedules.CosineDecay) and back.get_config() == cfg
    p = optim.schedules.PiecewiseConstantDecay(boundaries=[2, 4], values=[0.1, 0.05, 0.01])
    assert [p(k) for k in range(6)] == [0.1, 0.1, 0.1, 0.05, 0.05, 0.01]
    with pytest.raises(TypeError):
        optim.schedules.PiecewiseConstantDecay([2, 4], [0.1, 0.05, 0.01])
    with pytest.raises(optim.Error, match="decay_steps"):
        optim.schedules.ExponentialDecay(0.1)  # decay_steps is required
    with pytest.raises(optim.Error):
        optim.schedules.ExponentialDecay(0.1, 10, decay_rate=0.5, bogus=1)
    for name in ("ExponentialDecay", "PiecewiseConstantDecay", "PolynomialDecay",
                 "InverseTimeDecay", "CosineDecay", "CosineDecayRestarts"):
        assert issubclass(getattr(optim.schedules, name), optim.schedules.LearningRateSchedule)


def test_schedule_drives_the_learning_rate():
    import numpy as np
    s = optim.schedules.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5)
    opt = optim.SGD(learning_rate=s)
    w = np.zeros(3, np.float64)
    for k in range(5):
        assert opt.learning_rate == s(k)
        before = w.copy()
        opt.apply_gradients([(np.ones(3), w)])
        assert np.array_equal(w, before - s(k))
    opt.learning_rate = 0.5
    assert opt.learning_rate == 0.5 and opt.get_config()["learning_rate"] == 0.5
    opt.learning_rate = optim.schedules.InverseTimeDecay(1.0, decay_steps=1, decay_rate=1.0)
    assert opt.learning_rate == pytest.approx(1.0 / 6.0)
    assert opt.get_config()["learning_rate"]["class_name"] == "InverseTimeDecay"
