"""Bad inputs are refused with optim.Error (a ValueError) naming what is
wrong, and a refused call changes nothing: no array, no slot, no counter,
no variable name. Each bad pair comes after a good one, which must not have
been stepped either."""
import numpy as np
import pytest

import optim


class Setup:
    def __init__(self):
        self.opt = optim.Adam(learning_rate=0.1)
        self.w = np.arange(6, dtype=np.float32).reshape(2, 3)
        self.e = np.linspace(-1, 1, 8).reshape(4, 2)
        self.opt.apply_gradients([(np.ones((2, 3), np.float32), self.w),
                                  (np.ones((4, 2)), self.e)])
        self.snap = self.state()

    def state(self):
        return (self.w.tobytes(), self.e.tobytes(), self.opt.iterations, self.opt.weight_names,
                [a.tobytes() for a in self.opt.get_weights()],
                [v.name for v in self.opt.variables])

    def refused(self, pairs, *needles):
        with pytest.raises(optim.Error) as e:
            self.opt.apply_gradients([(np.ones((2, 3), np.float32), self.w)] + pairs)
        for n in needles:
            assert n in str(e.value), str(e.value)
        assert self.state() == self.snap, "a refused call changed something"
        return str(e.value)


@pytest.fixture
def s():
    return Setup()


def test_error_is_a_value_error():
    assert issubclass(optim.Error, ValueError)


def test_gradient_dtype(s):
    s.refused([(np.ones((4, 2), np.float32), s.e)], "'variable_1'", "float32", "float64")
    s.refused([(np.ones((4, 2), np.int64), s.e)], "pair 1", "gradient", "format")


def test_gradient_shape(s):
    s.refused([(np.ones((2, 4)), s.e)], "shape [2, 4]", "[4, 2]")
    s.refused([(np.ones(8), s.e)], "shape")


def test_read_only_variable(s):
    ro = np.zeros(3, np.float32)
    ro.setflags(write=False)
    s.refused([(np.ones(3, np.float32), ro)], "pair 1", "read-only")
    view = s.e.view()
    view.setflags(write=False)
    s.refused([(np.ones((4, 2)), view)], "read-only")
    s.refused([(np.ones(3, np.float32), b"abcdefghijkl")], "read-only")


def test_non_contiguous(s):
    big = np.zeros((4, 4), np.float32)
    s.refused([(np.ones((4, 2), np.float32), big[:, ::2])], "not C-contiguous")
    s.refused([(np.ones((2, 4)).T, s.e)], "pair 1: the gradient", "not C-contiguous")
    fortran = np.asfortranarray(np.zeros((4, 3), np.float32))
    s.refused([(np.ones((4, 3), np.float32), fortran)], "C-contiguous")


def test_not_arrays_and_not_pairs(s):
    s.refused([(np.ones(3), [0.0, 1.0, 2.0])], "list", "not an array")
    s.refused([(np.ones(3), np.zeros(3, np.int32))], "format 'i'")
    s.refused([(np.ones((4, 2)),)], "pair 1", "(gradient, variable) pair")
    s.refused([np.ones(2)], "pair 1")
    s.refused([(np.ones((4, 2)), s.e), (np.ones((4, 2)), s.e)], "more than once")
    s.refused([(np.ones((1,) * 9), np.zeros((1,) * 9))], "dimensions")
    raw = bytearray(40)
    mis = np.ndarray((4,), np.float32, buffer=raw, offset=2)
    s.refused([(np.ones(4, np.float32), mis)], "aligned")
    with pytest.raises(optim.Error, match="no gradients"):
        s.opt.apply_gradients([(None, s.w)])
    with pytest.raises(TypeError):
        s.opt.apply_gradients(5)
    assert s.state() == s.snap


def test_known_memory_seen_otherwise(s):
    s.refused([(np.ones(6, np.float32), s.w.reshape(-1))], "variable 'variable'", "[2, 3]")
    s.refused([(np.ones(8), optim.Variable(s.e, name="other"))], "'other'", "'variable_1'")


def test_sparse(s):
    ok = np.ones((2, 2))
    s.refused([(optim.IndexedSlices(ok, np.array([0, 4])), s.e)], "index 4", "out of range")
    s.refused([(optim.IndexedSlices(ok, np.array([0.0, 1.0])), s.e)], "int32 or int64")
    s.refused([(optim.IndexedSlices(np.ones((3, 2)), np.array([0, 1])), s.e)], "values")
    s.refused([(optim.IndexedSlices(np.ones((2, 2), np.float32), [0, 1]), s.e)], "dtype")
    s.refused([(optim.IndexedSlices(ok, np.array([[0, 1]])), s.e)], "dimensions")


def test_new_variables_of_a_refused_call_are_forgotten(s):
    new = np.zeros(5, np.float32)
    s.refused([(np.ones(5, np.float32), new), (np.ones(4), s.e)], "shape")
    s.opt.apply_gradients([(np.ones(5, np.float32), np.zeros(5, np.float32))])
    assert [v.name for v in s.opt.variables] == ["variable", "variable_1", "variable_2"]


def test_not_trainable(s):
    v = optim.Variable(np.zeros(2), name="frozen", trainable=False)
    s.refused([(np.ones(2), v)], "not trainable")


def test_unknown_and_bad_keywords():
    with pytest.raises(optim.Error, match="bogus"):
        optim.Adam(bogus=1)
    with pytest.raises(optim.Error, match="beta_1"):
        optim.Adam(beta_1=2.0)
    with pytest.raises(optim.Error, match="learning_rate"):
        optim.Adam(learning_rate="fast")
    with pytest.raises(optim.Error):
        optim.from_config({"class_name": "NoSuchOptimizer", "config": {}})
    with pytest.raises(optim.Error):
        optim.from_config('{"class_name": "Adam", "config": {')
    with pytest.raises(TypeError):
        optim.Adam(learning_rate=object())


def test_hyperparameters_and_weights(s):
    with pytest.raises(optim.Error, match="learning_rate"):
        s.opt.learning_rate = "fast"
    with pytest.raises(optim.Error):
        s.opt.beta_1 = 1.5
    with pytest.raises(optim.Error):
        s.opt.set_hyper("no_such_key", 1.0)
    with pytest.raises(AttributeError):
        s.opt.no_such_key
    w = s.opt.get_weights()
    with pytest.raises(optim.Error, match="2 arrays given"):
        s.opt.set_weights(w[:2])
    with pytest.raises(optim.Error):
        s.opt.set_weights([w[0], w[1].astype(np.float64)] + w[2:])
    with pytest.raises(optim.Error):
        s.opt.set_weights([w[0], w[1].reshape(3, 2)] + w[2:])
    bad_v = [a.copy() for a in w]
    bad_v[3][0, 0] = -1.0  # v of a float32 variable must be >= 0
    with pytest.raises(optim.Error):
        s.opt.set_weights(bad_v)
    with pytest.raises(optim.Error):
        s.opt.iterations = -1
    assert s.state() == s.snap


def test_variable_arguments():
    with pytest.raises(optim.Error, match="dtype 'float64'"):
        optim.Variable(np.zeros(2, np.float32), dtype="float64")
    with pytest.raises(optim.Error, match="read-only"):
        optim.Variable(np.frombuffer(b"\0" * 8, np.float32))
    with pytest.raises(optim.Error):
        optim.Variable(np.zeros(2, np.float32), name="")
    with pytest.raises(optim.Error, match="format 'H'"):
        optim.Variable(np.zeros(2, np.uint16))
