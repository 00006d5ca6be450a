"""optim.schedules: keras.optimizers.schedules' learning-rate schedules, from liboptim.

One class per schedule class in optim's registry (ExponentialDecay,
PiecewiseConstantDecay, PolynomialDecay, InverseTimeDecay, CosineDecay,
CosineDecayRestarts, and those of plugins), taking Keras's arguments:

    lr = optim.schedules.CosineDecay(initial_learning_rate=0.1, decay_steps=1000)
    opt = optim.SGD(learning_rate=lr)   # the optimizer takes a copy
    lr(10)                              # the value at step 10

Values are computed in double precision from Keras's closed forms
(docs/schedules.md).
"""
import json as _json

from . import _optim

__all__ = ["LearningRateSchedule", "serialize", "deserialize"]


class LearningRateSchedule(_optim.Schedule):
    """A schedule: LearningRateSchedule(config) is deserialize's, for any class."""

    def __init__(self, config):
        from . import _config_text
        _optim.Schedule.__init__(self, _config_text(config))

    @classmethod
    def from_config(cls, config):
        if cls is LearningRateSchedule:
            return deserialize(config)
        return cls(**config)

    def get_config(self):
        return _json.loads(self._serialize_text())["config"]

    def __repr__(self):
        return "<optim.schedules.%s %s>" % (type(self).__name__, self.get_config())


def _make_class(name, positional):
    def __init__(self, *args, **kwargs):
        if len(args) > len(positional):
            raise TypeError("%s() takes %d positional arguments (%s); pass the others by keyword"
                            % (name, len(positional), ", ".join(positional) or "none"))
        for key, value in zip(positional, args):
            if key in kwargs:
                raise TypeError("%s() got %s twice" % (name, key))
            kwargs[key] = value
        from . import _dumps
        _optim.Schedule.__init__(self, _dumps({"class_name": name, "config": kwargs}))

    doc = "%s(%s): keras.optimizers.schedules.%s (docs/schedules.md)." % (
        name, ", ".join(list(positional) + ["**config"]), name)
    return type(name, (LearningRateSchedule,), {"__init__": __init__, "__doc__": doc,
                                                "__module__": __name__, "__qualname__": name})


_by_name = {}


def _refresh():
    g = globals()
    for name, positional in _optim._schedule_classes():
        if name in _by_name or not name.isidentifier() or name in g:
            continue
        g[name] = _by_name[name] = _make_class(name, tuple(positional))
        __all__.append(name)


def deserialize(config):
    """The schedule of {"class_name": ..., "config": ...} (a dict or JSON text)."""
    tmp = LearningRateSchedule(config)
    cls = _by_name.get(tmp.class_name)
    if cls is None:
        return tmp
    return cls(**tmp.get_config())


def serialize(schedule):
    return _json.loads(schedule._serialize_text())
