"""optim.torch.Optimizer's state beyond the plain case: bfloat16 and float16
slots round-trip through state_dict bit for bit; configs given as optim
objects or schedules pickle; copy.deepcopy and pickle rebuild a working
optimizer; a parameter whose dtype changed is refused naming it; torch's
OneCycleLR momentum cycling reaches optim; a torch.optim state dict is
refused as one. Skipped where torch is not installed."""
import copy
import io
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")
import optim  # noqa: E402
import optim.schedules  # noqa: E402
import optim.torch  # noqa: E402


def mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def train(model, opt, steps, start=0):
    for k in range(start, start + steps):
        g = torch.Generator().manual_seed(100 + k)
        x, y = torch.randn(16, 4, generator=g), torch.randn(16, 2, generator=g)
        dtype = next(model.parameters()).dtype
        x, y = x.to(dtype), y.to(dtype)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def weights_by_name(opt):
    out = {}
    for o, *_ in opt._optims.values():
        out.update(zip(o.weight_names, o.get_weights()))
    return out


def round_trip(sd):
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    return torch.load(buf)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_slots_round_trip(dtype):
    def make():
        torch.manual_seed(3)
        return torch.nn.Parameter(torch.randn(12).to(dtype))
    p = make()
    opt = optim.torch.Optimizer([p], "adam", learning_rate=0.01)
    for k in range(3):
        p.grad = torch.randn(12, generator=torch.Generator().manual_seed(k)).to(dtype)
        opt.step()
    sd = round_trip(opt.state_dict())
    assert sd["state"][0]["m"].dtype == dtype
    q = torch.nn.Parameter(p.detach().clone())
    opt2 = optim.torch.Optimizer([q], "adam", learning_rate=0.01)
    opt2.load_state_dict(sd)
    a, b = weights_by_name(opt), weights_by_name(opt2)
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].tobytes() == b[name].tobytes(), name
    g = torch.randn(12, generator=torch.Generator().manual_seed(9)).to(dtype)
    p.grad, q.grad = g.clone(), g.clone()
    opt.step()
    opt2.step()
    assert torch.equal(p.detach().view(torch.int16), q.detach().view(torch.int16))


@pytest.mark.parametrize("config", [optim.Adam(0.3), optim.Adam(
    optim.schedules.CosineDecay(0.1, 100))])
def test_object_configs_pickle(config):
    model = mlp()
    opt = optim.torch.Optimizer(model.parameters(), config)
    train(model, opt, 2)
    sd = round_trip(opt.state_dict())
    other = mlp()
    other.load_state_dict(model.state_dict())
    opt2 = optim.torch.Optimizer(other.parameters(), "sgd")
    opt2.load_state_dict(sd)
    train(model, opt, 2, 2)
    train(other, opt2, 2, 2)
    for a, b in zip(model.parameters(), other.parameters()):
        assert torch.equal(a, b)


def test_schedule_as_learning_rate_key_pickles():
    model = mlp()
    opt = optim.torch.Optimizer(model.parameters(), "adam",
                                learning_rate=optim.schedules.CosineDecay(0.1, 100))
    train(model, opt, 1)
    round_trip(opt.state_dict())


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_copies_are_working_optimizers(how):
    model = mlp()
    opt = optim.torch.Optimizer(model.parameters(), "adam", learning_rate=0.01)
    train(model, opt, 2)
    if how == "deepcopy":
        model2, opt2 = copy.deepcopy((model, opt))
    else:
        model2, opt2 = pickle.loads(pickle.dumps((model, opt)))
    train(model, opt, 2, 2)
    train(model2, opt2, 2, 2)
    for a, b in zip(model.parameters(), model2.parameters()):
        assert torch.equal(a, b)
    assert weights_by_name(opt2)["iterations"] == 4


@pytest.mark.parametrize("change", ["double", "new memory"])
def test_parameter_with_new_memory_or_dtype_keeps_its_slots(change):
    """model.double() or p.data = ... after steps: the slots follow (cast to the new
    dtype), one variable per parameter, and the steps go on as an optimizer loaded
    from the state dict at that point does."""
    model = mlp()
    opt = optim.torch.Optimizer(model.parameters(), "adam", learning_rate=0.01)
    train(model, opt, 2)
    sd = copy.deepcopy(opt.state_dict())
    if change == "double":
        model.double()
    else:
        for p in model.parameters():
            p.data = p.data.clone()
    other = copy.deepcopy(model)
    ref = optim.torch.Optimizer(other.parameters(), "adam", learning_rate=0.01)
    ref.load_state_dict(sd)
    train(model, opt, 2, 2)
    train(other, ref, 2, 2)
    for a, b in zip(model.parameters(), other.parameters()):
        assert torch.equal(a, b)
    names = opt._optims[0][0].weight_names
    assert len(names) == len(set(names)) == 1 + 2 * 4
    dtype = np.float64 if change == "double" else np.float32
    assert all(w.dtype == dtype for w in opt._optims[0][0].get_weights()[1:])
    assert weights_by_name(opt)["iterations"] == 4


def test_parameter_with_new_shape_is_refused():
    model = mlp()
    opt = optim.torch.Optimizer(model.parameters(), "adam")
    train(model, opt, 1)
    p = model[0].bias
    p.data = torch.zeros(3)
    p.grad = torch.ones(3)
    with pytest.raises(optim.Error, match=r"parameter 1 \(shape \(3,\).*had shape \(8,\).*"
                                          r"create the optimizer after"):
        opt.step()


def test_one_cycle_momentum_reaches_optim():
    model = mlp()
    opt = optim.torch.Optimizer(model.parameters(), "sgd", learning_rate=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10,
                                                base_momentum=0.8, max_momentum=0.95)
    for k in range(3):
        given = opt.param_groups[0]["momentum"]
        train(model, opt, 1, k)
        assert opt._optims[0][0].momentum == pytest.approx(given, rel=1e-6)
        sched.step()
    assert opt.param_groups[0]["momentum"] < 0.95
    opt2 = optim.torch.Optimizer(mlp().parameters(), "sgd", learning_rate=0.1, momentum=0.9)
    opt2.load_state_dict(opt.state_dict())
    assert opt2._optims[0][0].momentum == pytest.approx(opt.param_groups[0]["momentum"])


def test_one_cycle_betas_reach_adams_beta_1():
    model = mlp()
    opt = optim.torch.Optimizer(model.parameters(), "adam", learning_rate=0.1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10)
    for k in range(3):
        given = opt.param_groups[0]["betas"][0]
        train(model, opt, 1, k)
        assert opt._optims[0][0].beta_1 == pytest.approx(given, rel=1e-6)
        sched.step()
    assert given < 0.9
    opt = optim.torch.Optimizer(mlp().parameters(), "adam", betas=(0.5, 0.75))
    assert (opt._optims[0][0].beta_1, opt._optims[0][0].beta_2) == (0.5, 0.75)


def test_torch_state_dict_is_refused():
    model = mlp()
    topt = torch.optim.Adam(model.parameters())
    train(model, topt, 1)
    opt = optim.torch.Optimizer(model.parameters(), "adam")
    with pytest.raises(optim.Error, match="not an optim.torch state dict"):
        opt.load_state_dict(topt.state_dict())


def test_swalr_and_cyclic_momentum_state_dicts_load():
    """Schedulers' own group keys (SWALR's swa_lr, CyclicLR's momentum) are no config
    keys: the state dict loads, and CyclicLR's momentum reaches SGD."""
    model = mlp()
    opt = optim.torch.Optimizer(model.parameters(), "sgd", learning_rate=0.1, momentum=0.9)
    cyc = torch.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=4)
    swa = torch.optim.swa_utils.SWALR(opt, swa_lr=0.05)
    for k in range(2):
        given = opt.param_groups[0]["momentum"]
        train(model, opt, 1, k)
        assert opt._optims[0][0].momentum == pytest.approx(given, rel=1e-6)
        cyc.step()
        swa.step()
    assert "swa_lr" in opt.param_groups[0] and given != 0.9
    opt2 = optim.torch.Optimizer(mlp().parameters(), "sgd", learning_rate=0.1, momentum=0.9)
    opt2.load_state_dict(opt.state_dict())
