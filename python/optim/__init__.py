"""optim: Keras's optimizers of both generations from liboptim (C), on NumPy arrays.

    import numpy as np
    import optim

    w = np.zeros(10, np.float32)
    opt = optim.Adam(learning_rate=1e-3, clipnorm=1.0)
    opt.apply_gradients([(np.ones(10, np.float32), w)])  # w is updated in place

One class per optimizer class in optim's registry (the built-ins, and those
a plugin brings with load_plugin), taking Keras's keyword arguments;
from_config / serialize / deserialize speak Keras's JSON of either
generation. Every refusal raises optim.Error (a ValueError) with the
library's message, and changes nothing. docs/python.md is the guide.
"""
import json as _json
import os as _os

from . import _optim
from ._optim import Error, Variable, set_num_threads

__all__ = ["Error", "Variable", "IndexedSlices", "Optimizer", "from_config", "serialize",
           "deserialize", "get", "load_plugin", "set_num_threads", "conformance", "schedules"]

# NumPy dtypes of the library's dtypes (bfloat16: its bits, as uint16).
_NUMPY_DTYPE = {"float32": "float32", "float64": "float64", "float16": "float16",
                "bfloat16": "uint16", "int32": "int32", "int64": "int64"}


def _numpy():
    import numpy  # only where arrays are made: `import optim` needs no NumPy
    return numpy


def _has_buffer(x):
    try:
        memoryview(x).release()
        return True
    except TypeError:
        return False


def _json_default(o):
    if isinstance(o, _optim.Optimizer):
        return serialize(o)
    if isinstance(o, _optim.Schedule):
        return _json.loads(o._serialize_text())
    if getattr(o, "shape", None) == () and callable(getattr(o, "item", None)):
        return o.item()  # NumPy scalars
    if callable(getattr(o, "tolist", None)):
        return o.tolist()  # NumPy arrays (a schedule's boundaries)
    raise TypeError("a %s cannot go into an optim config" % type(o).__name__)


def _non_finite(obj, path):
    """The first key path in obj holding a NaN or an infinity (JSON has
    neither), as (path, value); None if there is none."""
    if isinstance(obj, float) and (obj != obj or abs(obj) == float("inf")):
        return path, obj
    items = obj.items() if isinstance(obj, dict) else (
        enumerate(obj) if isinstance(obj, (list, tuple)) else ())
    for k, v in items:
        found = _non_finite(v, "%s.%s" % (path, k) if path else str(k))
        if found:
            return found
    return None


def _dumps(obj, what="config"):
    found = _non_finite(obj, "")
    if found:
        raise Error("%s: %s is %r; expected a finite number (JSON, and so a Keras config, "
                    "has no NaN or infinity)" % (what, found[0], found[1]))
    return _json.dumps(obj, default=_json_default)


def _config_text(config):
    """JSON text of a config: a dict, JSON text, or a bare class name ("adam")."""
    if isinstance(config, (bytes, bytearray)):
        config = config.decode()
    if isinstance(config, str):
        return config if config.lstrip()[:1] in ("{", '"') else _json.dumps(config)
    return _dumps(config)


class IndexedSlices(_optim.IndexedSlices):
    """IndexedSlices(values, indices, dense_shape=None): a sparse gradient.

    values: [n, row shape...] in the variable's dtype (a Python list is made an array of
    the variable's dtype when applied); indices: n int32 or int64 row indices into the
    variable's first dimension (repeats are summed, as Keras does).
    """
    __slots__ = ()

    def __new__(cls, values, indices, dense_shape=None):
        if not _has_buffer(indices):
            indices = _numpy().asarray(indices, dtype="int64")
        return super().__new__(cls, values, indices, dense_shape)


class Optimizer(_optim.Optimizer):
    """An optim optimizer: Optimizer(config) is from_config's, for any class.

    Each class of the registry is a subclass (optim.Adam, optim.Lookahead, ...) made
    from its Keras keyword arguments.
    """

    def __init__(self, config, inner=None):
        _optim.Optimizer.__init__(self, _config_text(config), inner)

    @classmethod
    def from_config(cls, config):
        """The optimizer of this class with the keys of config (get_config's dict)."""
        if cls is Optimizer:
            return from_config(config)
        return cls(**config)

    def get_config(self):
        """The config dict, with Keras's keys for the class and generation."""
        return _json.loads(self._config_text())

    def get_weights(self):
        """The weights as NumPy arrays: iterations, then each slot (weight_names)."""
        np = _numpy()
        return [np.frombuffer(data, dtype=_NUMPY_DTYPE[dtype]).reshape(shape)
                for _, dtype, shape, data in self._weights_raw()]

    def set_weights(self, weights):
        """Sets every weight, in get_weights's order; nothing changes on a refusal.
        A Python list (not an array) is made an array of its weight's dtype."""
        np = _numpy()
        weights = list(weights)
        if all(map(_has_buffer, weights)):
            return self._set_weights_raw(weights)
        dtypes = [d for _, d, _, _ in self._weights_raw()]
        dtypes += [None] * (len(weights) - len(dtypes))
        self._set_weights_raw([w if _has_buffer(w) else np.asarray(
            w, dtype=None if d in (None, "bfloat16") else d, order="C")
            for w, d in zip(weights, dtypes)])

    def __getattr__(self, name):
        # Hyperparameters as attributes (opt.beta_1), as Keras's optimizers have them.
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.get_hyper(name)
        except Error:
            raise AttributeError("%r object has no attribute %r"
                                 % (type(self).__name__, name)) from None

    def __setattr__(self, name, value):
        if not name.startswith("_") and not hasattr(type(self), name) and self._is_key(name):
            self.set_hyper(name, value)
        else:
            object.__setattr__(self, name, value)

    def _is_key(self, name):
        try:
            return name in self.get_config()
        except Error:
            return False

    def __repr__(self):
        try:
            return "<optim.%s %r iterations=%d>" % (type(self).__name__, self.name,
                                                    self.iterations)
        except Error:
            return "<optim.%s (not created)>" % type(self).__name__


def _inner_config(o):
    """An inner optimizer given by keyword, as its config (a copy of it)."""
    if o.variables or o.iterations:
        raise Error("the inner optimizer has stepped already; wrap an optimizer before its "
                    "first step")
    return serialize(o)


def _make_class(name, config_name, wrapper):
    def __init__(self, *args, **kwargs):
        inner = None
        if len(args) > 1:
            raise TypeError("%s() takes at most one positional argument (%s); pass the others "
                            "by keyword" % (name, "the inner optimizer" if wrapper
                                            else "learning_rate"))
        if args and wrapper:
            inner = args[0] if isinstance(args[0], _optim.Optimizer) else from_config(args[0])
        elif args:
            if "learning_rate" in kwargs:
                raise TypeError("%s() got learning_rate twice" % name)
            kwargs["learning_rate"] = args[0]
        for k, v in kwargs.items():
            if isinstance(v, _optim.Optimizer):
                kwargs[k] = _inner_config(v)
        _optim.Optimizer.__init__(self, _dumps({"class_name": config_name, "config": kwargs},
                                               name), inner)

    doc = ("%s(%s**config): optim's %s, from Keras's keyword arguments (config keys).\n\n"
           "docs/optimizers.md has its keys, defaults and update rule."
           % (name, "inner_optimizer, " if wrapper else "learning_rate=..., ", config_name))
    return type(name, (Optimizer,), {"__init__": __init__, "__doc__": doc,
                                     "__module__": __name__, "__qualname__": name})


_by_name = {}  # a registry name, lower case -> its class


def _refresh():
    """Makes a class for each registered class that has none yet."""
    g = globals()
    for name, tfa_name, wrapper, *_ in _optim._classes():
        for ctor, config_name in ((name, name), (tfa_name, "Addons>%s" % tfa_name)):
            if not ctor or not ctor.isidentifier() or ctor in g:
                continue
            cls = g[ctor] = _make_class(ctor, config_name, wrapper)
            _by_name.setdefault(ctor.lower(), cls)
            if ctor not in __all__:
                __all__.append(ctor)
    schedules._refresh()


def from_config(config):
    """The optimizer of a Keras config: a dict, JSON text, or a class name ("adam").

    Either generation, as tf.keras, TF Addons or Keras 3 wrote it; an instance of the
    class's subclass (optim.Adam...).
    """
    tmp = Optimizer(config)
    cls = _by_name.get(tmp.class_name.lower())
    if cls is None:
        return tmp
    obj = cls.__new__(cls)
    obj._take(tmp)
    return obj


deserialize = from_config


def serialize(optimizer):
    """{"class_name": ..., "config": ...} (with module and registered_name where the
    generation writes them), as Keras's serialize does."""
    return _json.loads(optimizer._serialize_text())


def get(identifier):
    """keras.optimizers.get: an optimizer as is, else from_config(identifier)."""
    return identifier if isinstance(identifier, _optim.Optimizer) else from_config(identifier)


def load_plugin(path):
    """Opens a plugin (a shared library built against this liboptim, optim/plugin.h) and
    registers its classes; each gets a class here. True if loaded now, False if before."""
    loaded = _optim.load_plugin(_os.fspath(path))
    _refresh()
    return loaded


def conformance(class_name, generation=None, config=None, group=None):
    """Runs optim's contract checks on a registered class in this process:
    (passed, failed, lines), one line per check ("PASS config.round_trip: ...")."""
    if config is not None and not isinstance(config, str):
        config = _dumps(config)
    return _optim.conformance(class_name, generation, config, group)


from . import schedules  # noqa: E402  (needs the names above)

_refresh()
