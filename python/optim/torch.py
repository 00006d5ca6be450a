"""optim.torch: optim's optimizers as a torch.optim.Optimizer, for PyTorch CPU tensors.

    import optim.torch
    opt = optim.torch.Optimizer(model.parameters(), "adam", learning_rate=1e-3)
    for x, y in batches:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

Each param group steps through one optim optimizer made from its config (a
class name, a Keras config dict or JSON text, or an optim optimizer to copy)
and its own keys: Keras config keys (learning_rate, beta_1, clipnorm, ...),
and torch's "lr", which torch's learning-rate schedulers set. Parameters are
updated in place through their own memory (no copy); sparse gradients
(nn.Embedding(sparse=True)) become optim.IndexedSlices. state_dict() holds
optim's weights as tensors under optim's slot names (docs/python.md) and
load_state_dict() resumes bit for bit. This module is the only place optim
imports torch.
"""
import json as _json
from operator import is_ as _is

import numpy as _np
import torch as _torch

import optim as _optim

_profiler_enabled = getattr(_torch.autograd, "_profiler_enabled", lambda: True)

__all__ = ["Optimizer"]

# Group keys that are torch's, its schedulers' or ours, not config keys
# ("betas" is torch's (beta_1, beta_2), which OneCycleLR cycles: see _SYNCED).
_TORCH_KEYS = {"params", "config", "lr", "initial_lr", "max_lr", "min_lr", "optim_weights",
               "betas", "max_momentum", "base_momentum", "base_lr", "swa_lr"}

# Config keys that torch's schedulers set in a group (OneCycleLR's and CyclicLR's
# cycle_momentum): the optimizer takes the group's value at each step.
_SYNCED = (("momentum", lambda g: g.get("momentum")),
           ("beta_1", lambda g: g["betas"][0] if g.get("betas") else None),
           ("beta_2", lambda g: g["betas"][1] if g.get("betas") else None))


def _array(t, what):
    """A NumPy view of tensor t's memory (bfloat16: its bits as uint16)."""
    if t.device.type != "cpu":
        raise _optim.Error("%s is on %s; optim.torch steps CPU tensors (move the model with "
                           ".cpu(), or use a CUDA optimizer)" % (what, t.device))
    if not t.is_contiguous():
        raise _optim.Error("%s is not contiguous (shape %s, strides %s); optim updates "
                           "parameters in place, so each must be contiguous"
                           % (what, tuple(t.shape), t.stride()))
    t = t.detach()
    if t.dtype == _torch.bfloat16:
        return t.view(_torch.int16).numpy().view(_np.uint16)
    return t.numpy()


def _ptrs(params, grads):
    """Where the parameters and their dense gradients are."""
    return [t.data_ptr() for t in params] + [g.data_ptr() for g in grads if g is not None]


def _base_config(config):
    """{"class_name": ..., "config": {...}} of a group's config, plain data (optim
    optimizers and schedules in it serialized) so that state_dicts pickle."""
    if isinstance(config, _optim.Optimizer):
        return _optim.serialize(config)
    if isinstance(config, (bytes, str)):
        text = config.decode() if isinstance(config, bytes) else config
        if text.lstrip()[:1] != "{":
            return {"class_name": text, "config": {}}
        config = _json.loads(text)
    config = _plain(dict(config))
    config["config"] = dict(config.get("config", {}))
    return config


def _plain(value):
    """value with optim optimizers and schedules serialized (dicts), else as is."""
    if isinstance(value, (_optim.Optimizer, _optim._optim.Schedule)):
        return _json.loads(_optim._dumps(value))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _tensor(w):
    """A tensor copy of weight array w (bfloat16 bits, uint16, become bfloat16)."""
    if w.dtype == _np.uint16:  # torch 1.13 has no uint16: through int16
        return _torch.from_numpy(w.view(_np.int16).copy()).view(_torch.bfloat16)
    return _torch.from_numpy(w.copy())


class _Moved(Exception):
    """A parameter the optimizer knows has new memory or a new dtype."""


class Optimizer(_torch.optim.Optimizer):
    """Optimizer(params, config="adam", **keys): a torch.optim.Optimizer over optim.

    config names the class ("adam", "lion", "Addons>LAMB"), or is a Keras config dict or
    JSON text, or an optim optimizer whose config is copied; keys are config keys
    (learning_rate=1e-3, beta_1=0.9, weight_decay=0.01, is_legacy_optimizer=True, ...).
    A param group may give its own config and keys.
    """

    def __init__(self, params, config="adam", **keys):
        self._optims = {}  # group index -> [optim optimizer, the lr it was given,
        #                  the _SYNCED keys it has, their values given]
        self._vars = {}  # id(param) -> (param, Variable, data_ptr)
        self._pairs = {}  # group index -> ([(param, grad, grad's data_ptr)], pairs)
        self._index = None  # id(param) -> its index over all groups
        keys = {k: _plain(v) for k, v in keys.items()}
        super().__init__(params, dict(keys, config=_plain(config)))
        for gi in range(len(self.param_groups)):
            self._group_optimizer(gi)  # refuses a bad config now, not at the first step
        if "betas" in self.param_groups[0]:  # torch's OneCycleLR looks in defaults
            self.defaults.setdefault("betas", self.param_groups[0]["betas"])

    # ---- groups ----------------------------------------------------------------
    def _make(self, group):
        for k, v in group.items():
            if k != "params":
                group[k] = _plain(v)
        cfg = _base_config(group["config"])
        if isinstance(group["config"], _optim.Optimizer):
            group["config"] = cfg
        cfg["config"].update({k: v for k, v in group.items()
                              if k not in _TORCH_KEYS and not k.startswith("_")})
        opt = _optim.from_config(cfg)
        lr_is_schedule = isinstance(cfg["config"].get("learning_rate"), (dict, _optim.schedules
                                                                        .LearningRateSchedule))
        if "lr" in group and not lr_is_schedule and group["lr"] is not None:
            opt.learning_rate = group["lr"]
        group["lr"] = opt.learning_rate
        return opt

    def _group_optimizer(self, gi):
        entry = self._optims.get(gi)
        group = self.param_groups[gi]
        if entry is None:
            opt = self._make(group)
            entry = self._optims[gi] = [opt, group["lr"], self._synced(opt, group), {}]
        opt = entry[0]
        if group["lr"] != entry[1]:  # a torch scheduler, or the user, set it
            opt.learning_rate = group["lr"]
            entry[1] = group["lr"] = opt.learning_rate
        for key, get in entry[2]:
            value = get(group)
            if value is not None and value != entry[3].get(key):
                setattr(opt, key, value)
                entry[3][key] = value
        return opt

    @staticmethod
    def _synced(opt, group):
        """The (key, getter) of _SYNCED that the class has (SGD's momentum, Adam's beta_1);
        torch's schedulers look for "betas" in the group, so a class with beta_1 gets it."""
        config = opt.get_config()
        if "beta_1" in config and "betas" not in group and "beta_2" in config:
            group["betas"] = (config["beta_1"], config["beta_2"])
        return [(k, get) for k, get in _SYNCED if k in config]

    def _variable(self, p, index):
        known = self._vars.get(id(p))
        if known is not None and known[0] is p and known[2] == p.data_ptr():
            return known[1]
        what = "parameter %d (shape %s, %s)" % (index, tuple(p.shape), p.dtype)
        if known is not None and known[0] is p:
            if known[4] != p.shape:
                raise _optim.Error("%s had shape %s when the optimizer made its slots; they "
                                   "cannot follow a new shape: create the optimizer after "
                                   "changing the model" % (what, tuple(known[4])))
            raise _Moved()  # new memory or dtype (model.double()): _step rebuilds
        v = _optim.Variable(_array(p, what), name="param_%d" % index,
                            dtype="bfloat16" if p.dtype == _torch.bfloat16 else None)
        self._vars[id(p)] = (p, v, p.data_ptr(), p.dtype, p.shape)
        return v

    def _param_index(self):
        if self._index is None:
            ps = [p for group in self.param_groups for p in group["params"]]
            self._index = {id(p): k for k, p in enumerate(ps)}
        return self._index

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        if hasattr(self, "_index"):
            self._index = None
            self._pairs.clear()

    # ---- step --------------------------------------------------------------------
    def _grad(self, p, index):
        g = p.grad
        if g is None:
            return None
        what = "the gradient of parameter %d" % index
        if g.is_sparse:
            values = g._values().contiguous()
            return _optim.IndexedSlices(_array(values, what), g._indices()[0].contiguous().numpy())
        return _array(g if g.is_contiguous() else g.contiguous(), what)

    def _group_pairs(self, gi, params):
        """The group's (gradient, Variable) pairs. Making a NumPy view costs about 1.7 us
        per tensor, so the views of the last step are reused while the group holds the
        same parameters and every one keeps its gradient tensor, both at the same memory
        (sparse gradients are read afresh)."""
        grads = [p.grad for p in params]
        last = self._pairs.get(gi)
        if (last is not None and last[0] is not None and len(last[1]) == len(params)
                and all(map(_is, last[1], params)) and all(map(_is, last[2], grads))
                and last[0] == _ptrs(params, grads)):
            return last[3]
        index = self._param_index()
        pairs = []
        for p in params:  # the parameter first: a message names it, not its gradient
            v = self._variable(p, index[id(p)])
            pairs.append((self._grad(p, index[id(p)]), v))
        sparse = any(g is not None and g.is_sparse for g in grads)
        ptrs = None if sparse else _ptrs(params, grads)
        self._pairs[gi] = (ptrs, list(params), grads, pairs)
        return pairs

    def _rebuild(self):
        """Remakes every group's optimizer from its state, as load_state_dict does: a
        parameter has new memory (p.data = ...) or a new dtype (model.double()); its
        slots are cast to the new dtype (a new variable beside the old one would
        leave two of the same name)."""
        self._sync_state_out()
        self._optims, self._vars, self._pairs, self._index = {}, {}, {}, None
        for gi, group in enumerate(self.param_groups):
            self._sync_state_in(group, self._group_optimizer(gi))

    def _step(self, closure):  # no autograd here: NumPy views only
        loss = None
        if closure is not None:
            with _torch.enable_grad():
                loss = closure()
        for gi, group in enumerate(self.param_groups):
            opt = self._group_optimizer(gi)
            try:
                pairs = self._group_pairs(gi, group["params"])
            except _Moved:
                self._rebuild()
                opt = self._group_optimizer(gi)
                pairs = self._group_pairs(gi, group["params"])
            if any(g is not None for g, _ in pairs):
                opt.apply_gradients(pairs)
        return loss

    def step(self, closure=None):
        """One step of every group (torch's step: closure re-evaluates the loss)."""
        if _profiler_enabled():  # torch's profiler sees the step under torch's name
            with _torch.autograd.profiler.record_function(
                    "Optimizer.step#%s.step" % type(self).__name__):
                out = self._step(closure)
                self._optimizer_step_code()
                return out
        return self._step(closure)

    # torch 1.13 wraps every optimizer's step in record_function (about 12 us
    # a step, as long as an Adam step on 20,000 parameters) unless the step is
    # marked hooked; this step labels itself only while the profiler runs.
    # Versions with step hooks (register_step_pre_hook, torch 2) run them in
    # that wrapper, so there it stays.
    if not hasattr(_torch.optim.Optimizer, "register_step_pre_hook"):
        step.hooked = True

    # ---- state ------------------------------------------------------------------------
    # A parameter's state holds its slots under optim's names and "step" (the
    # group's iterations); a group's optimizer-level weights (Nadam's
    # u_product) go in the group as "optim_weights", which torch keeps as is
    # (it casts per-parameter state to the parameter's dtype).

    def _sync_state_out(self):
        index = self._param_index()
        self.state.clear()
        for gi, group in enumerate(self.param_groups):
            opt = self._group_optimizer(gi)
            by_name = {"param_%d" % index[id(p)]: p for p in group["params"]}
            names, weights = opt.weight_names, opt.get_weights()
            group["optim_weights"] = {}
            for name, w in zip(names[1:], weights[1:]):
                var, _, slot = name.partition("/")
                t = _tensor(w)
                if slot and var in by_name:
                    self.state[by_name[var]][slot] = t
                else:
                    group["optim_weights"][name] = t
            for p in group["params"]:
                if p in self.state:
                    self.state[p]["step"] = _torch.tensor(int(weights[0]), dtype=_torch.int64)

    def state_dict(self):
        self._sync_state_out()
        return super().state_dict()

    @staticmethod
    def _weight(t, have):
        """Saved tensor t as the weight `have` is (dtype, bfloat16 bits, shape)."""
        t = t.detach().cpu()
        if have.dtype == _np.uint16:
            a = t.to(_torch.bfloat16).contiguous().view(_torch.int16).numpy().view(_np.uint16)
        else:
            a = t.contiguous().numpy().astype(have.dtype, copy=False)
        return a.reshape(have.shape)

    def _sync_state_in(self, group, opt):
        """Makes opt's slots for every parameter of the group and sets the saved weights;
        a parameter without saved state keeps its fresh slots."""
        params, index = group["params"], self._param_index()
        first = next((p for p in params if self.state.get(p)), None)
        if first is None:
            return
        opt.build([self._variable(p, index[id(p)]) for p in params])
        by_name = {"param_%d" % index[id(p)]: p for p in params}
        saved = group.get("optim_weights") or {}
        weights = []
        for name, have in zip(opt.weight_names, opt.get_weights()):
            var, _, slot = name.partition("/")
            if name == "iterations":
                t = self.state[first].get("step")
            elif slot and var in by_name:
                t = self.state.get(by_name[var], {}).get(slot)
            else:
                t = saved.get(name)
            weights.append(have if t is None else self._weight(t, have))
        opt.set_weights(weights)

    def load_state_dict(self, state_dict):
        groups = state_dict.get("param_groups") if isinstance(state_dict, dict) else None
        if not isinstance(groups, list) or not all(
                isinstance(g, dict) and "config" in g for g in groups):
            raise _optim.Error("load_state_dict: this is not an optim.torch state dict (its "
                               "param_groups have no \"config\"; a torch.optim optimizer's "
                               "state dict holds that optimizer's own state, which optim's "
                               "slots cannot take)")
        super().load_state_dict(state_dict)
        self._optims, self._vars, self._pairs, self._index = {}, {}, {}, None
        for gi, group in enumerate(self.param_groups):
            self._sync_state_in(group, self._group_optimizer(gi))

    # ---- copies: torch's __getstate__ keeps defaults, state and param_groups; the
    # optim optimizers are rebuilt from them, as load_state_dict does.
    def __getstate__(self):
        self._sync_state_out()
        return super().__getstate__()

    def __setstate__(self, state):
        super().__setstate__(state)
        self._optims, self._vars, self._pairs, self._index = {}, {}, {}, None
        for gi, group in enumerate(self.param_groups):
            self._sync_state_in(group, self._group_optimizer(gi))

    def __repr__(self):
        return "optim.torch.Optimizer(%s)" % ", ".join(
            "group %d: %s" % (gi, self._group_optimizer(gi).class_name)
            for gi in range(len(self.param_groups)))
