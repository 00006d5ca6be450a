"""optim.torch.Optimizer, a torch.optim.Optimizer for PyTorch CPU tensors:
steps equal optim's own on the same gradients bit for bit; closures,
zero_grad, param groups with their own configs, torch's lr schedulers,
sparse gradients from nn.Embedding(sparse=True), bfloat16 parameters;
state_dict / load_state_dict resume exactly; a non-CPU or non-contiguous
parameter is refused naming it; `import optim` alone imports no torch.
Skipped where torch is not installed (Debian: python3-torch)."""
import copy
import io
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (Debian: python3-torch)")
import optim  # noqa: E402
import optim.torch  # noqa: E402


def mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def batch(k):
    g = torch.Generator().manual_seed(100 + k)
    return torch.randn(32, 6, generator=g), torch.randn(32, 3, generator=g)


def train(model, opt, steps, start=0):
    for k in range(start, start + steps):
        x, y = batch(k)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def test_steps_equal_optims_own():
    model = mlp()
    ref = [p.detach().numpy().copy() for p in model.parameters()]
    k3 = optim.Adam(learning_rate=0.01, clipnorm=1.0)
    opt = optim.torch.Optimizer(model.parameters(), "adam", learning_rate=0.01, clipnorm=1.0)
    for k in range(5):
        x, y = batch(k)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        grads = [p.grad.numpy().copy() for p in model.parameters()]
        opt.step()
        k3.apply_gradients(list(zip(grads, ref)))
    for p, r in zip(model.parameters(), ref):
        assert p.detach().numpy().tobytes() == r.tobytes()
    assert isinstance(opt, torch.optim.Optimizer)


def test_closure_and_zero_grad():
    model = mlp()
    opt = optim.torch.Optimizer(model.parameters(), "sgd", learning_rate=0.1)
    x, y = batch(0)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    first = opt.step(closure).item()
    assert opt.step(closure).item() < first
    opt.zero_grad()
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())


def test_state_dict_resumes_exactly():
    a, b = mlp(), mlp()
    oa = optim.torch.Optimizer(a.parameters(), "nadam", learning_rate=0.01)
    train(a, oa, 6)
    ob = optim.torch.Optimizer(b.parameters(), "nadam", learning_rate=0.01)
    train(b, ob, 3)
    buf = io.BytesIO()
    torch.save({"model": b.state_dict(), "opt": ob.state_dict()}, buf)
    buf.seek(0)
    saved = torch.load(buf)
    sd = saved["opt"]
    assert sorted(sd["state"][0]) == ["m", "step", "v"] and int(sd["state"][0]["step"]) == 3
    assert "u_product" in sd["param_groups"][0]["optim_weights"]
    c = mlp(seed=1)
    c.load_state_dict(saved["model"])
    oc = optim.torch.Optimizer(c.parameters(), "nadam", learning_rate=0.01)
    oc.load_state_dict(sd)
    train(c, oc, 3, start=3)
    for p, q in zip(a.parameters(), c.parameters()):
        assert torch.equal(p, q)
    for x, y in zip(oa.state_dict()["state"].values(), oc.state_dict()["state"].values()):
        assert all(torch.equal(x[k], y[k]) for k in x)


def test_param_groups_with_their_own_configs():
    model = mlp()
    first, second = list(model[0].parameters()), list(model[2].parameters())
    opt = optim.torch.Optimizer([{"params": first, "config": "sgd", "momentum": 0.9},
                                 {"params": second}], "adam", learning_rate=0.01)
    train(model, opt, 2)
    c0, c1 = (opt._group_optimizer(i).get_config() for i in range(2))
    assert c0["momentum"] == 0.9 and c0["learning_rate"] == 0.01 and "beta_1" not in c0
    assert c1["beta_1"] == 0.9 and c1["learning_rate"] == 0.01
    assert "SGD" in repr(opt) and "Adam" in repr(opt)
    with pytest.raises(optim.Error, match="beta_1"):
        optim.torch.Optimizer([{"params": first, "config": "sgd"}], "adam", beta_1=0.8)


def test_lr_scheduler_sets_the_learning_rate():
    model = mlp()
    opt = optim.torch.Optimizer(model.parameters(), "sgd", learning_rate=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for k in range(3):
        train(model, opt, 1, start=k)
        sched.step()
    assert opt._group_optimizer(0).learning_rate == pytest.approx(0.1 * 0.5 ** 3)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.0125)


def test_sparse_embedding_gradients():
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 4, sparse=True)
    w0 = emb.weight.detach().numpy().copy()
    opt = optim.torch.Optimizer(emb.parameters(), "adagrad", learning_rate=0.1)
    ids = torch.tensor([1, 3, 3, 7])
    emb(ids).sum().backward()
    assert emb.weight.grad.is_sparse
    opt.step()
    ref = optim.Adagrad(learning_rate=0.1)
    ref.apply_gradients([(optim.IndexedSlices(np.ones((4, 4), np.float32), ids.numpy()), w0)])
    assert emb.weight.detach().numpy().tobytes() == w0.tobytes()
    assert (emb.weight.detach().numpy()[0] == w0[0]).all()


def test_bfloat16_parameters():
    p = torch.nn.Parameter(torch.linspace(-1, 1, 8).to(torch.bfloat16))
    opt = optim.torch.Optimizer([p], "sgd", learning_rate=0.5)
    p.grad = torch.ones(8, dtype=torch.bfloat16)
    before = p.detach().clone()
    opt.step()
    assert torch.equal(p.detach(), (before.float() - 0.5).to(torch.bfloat16))
    assert opt.state_dict()["param_groups"][0]["lr"] == 0.5


def test_non_cpu_and_non_contiguous_parameters_are_named():
    meta = torch.nn.Parameter(torch.empty(3, device="meta"))
    meta.grad = torch.empty(3, device="meta")
    opt = optim.torch.Optimizer([torch.nn.Parameter(torch.zeros(2)), meta], "sgd")
    with pytest.raises(optim.Error, match="parameter 1 .*is on meta"):
        opt.step()
    t = torch.nn.Parameter(torch.zeros(4, 3).t())
    t.grad = torch.ones(3, 4)
    with pytest.raises(optim.Error, match="parameter 0 .*not contiguous"):
        optim.torch.Optimizer([t], "sgd").step()


def test_new_memory_under_the_same_tensors_is_stepped():
    """The views of the last step are reused only while parameters and gradients keep
    their memory: `p.grad.data = ...` and `p.data = ...` are seen at the next step."""
    a, b = mlp(), mlp()
    oa = optim.torch.Optimizer(a.parameters(), "adam", learning_rate=0.01)
    ob = optim.torch.Optimizer(b.parameters(), "adam", learning_rate=0.01)
    for k in range(4):
        for model, opt in ((a, oa), (b, ob)):
            x, y = batch(k)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            if model is a and k >= 1:  # the same values in new memory
                g = list(a.parameters())[k].grad
                g.data = g.data.clone()
            opt.step()
    for p, q in zip(a.parameters(), b.parameters()):
        assert p.detach().numpy().tobytes() == q.detach().numpy().tobytes()
    p = next(a.parameters())
    p.data = p.data.clone()
    before = p.detach().clone()
    oa.step()  # the same gradients: a stale view would leave the new memory as it was
    assert not torch.equal(p.detach(), before)


def test_profiler_sees_the_step():
    model = mlp()
    opt = optim.torch.Optimizer(model.parameters(), "adam")
    with torch.autograd.profiler.profile() as prof:
        train(model, opt, 1)
    assert any(e.name == "Optimizer.step#Optimizer.step" for e in prof.function_events)


def test_import_optim_alone_imports_no_torch():
    code = "import sys, optim; optim.Adam(); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_bench_python_step_runs():
    import os
    from conftest import SOURCE
    r = subprocess.run([sys.executable, os.path.join(SOURCE, "bench", "python_step.py"),
                        "--params", "20000", "--runs", "3", "--threads", "1"],
                       capture_output=True, text=True, check=True)
    for name in ("optim.torch", "optim numpy", "torch for-loop", "torch foreach",
                 "torch (better loop) / optim.torch", "10 float32 arrays of 100"):
        assert name in r.stdout, r.stdout
