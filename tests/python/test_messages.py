"""Messages of the Python package for a new user's mistakes, and Python
lists taken where the guide says so (converted to the variable's dtype)."""
import numpy as np
import pytest

import optim


def stepped_adam():
    w = np.zeros(4, np.float32)
    opt = optim.Adam(0.1)
    opt.apply_gradients([(np.ones(4, np.float32), w)])
    return opt, w


def test_float_iterations_names_it():
    opt, _ = stepped_adam()
    with pytest.raises(optim.Error, match=r"iterations.*2\.5.*integer"):
        opt.iterations = 2.5
    assert opt.iterations == 1


def test_set_weights_messages():
    opt, _ = stepped_adam()
    ws = opt.get_weights()
    bad = [ws[0], ws[1].astype(np.float64)] + ws[2:]
    with pytest.raises(optim.Error) as e:
        opt.set_weights(bad)
    msg = str(e.value)
    assert "set_weights: set_weights" not in msg
    assert "float64" in msg and "(2)" not in msg, msg
    with pytest.raises(optim.Error) as e:
        opt.set_weights([ws[0], np.zeros(3, np.float32), ws[2]])
    msg = str(e.value)
    assert msg.count("set_weights") == 1 and "shape [3], expected [4]" in msg, msg
    with pytest.raises(optim.Error) as e:
        opt.set_weights([np.array(1.0)] + ws[1:])
    msg = str(e.value)
    assert "indices" not in msg and "int32 or int64" in msg, msg


def test_lists_take_the_variables_dtype():
    w = np.zeros((5, 2), np.float32)
    opt = optim.SGD(1.0)
    opt.apply_gradients([(optim.IndexedSlices([[1.0, 1.0]], [4]), w)])
    assert w[4].tolist() == [-1.0, -1.0] and not w[:4].any()
    a, wa = stepped_adam()
    a.set_weights([x.tolist() for x in a.get_weights()])
    b, _ = stepped_adam()
    for x, y in zip(a.get_weights(), b.get_weights()):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
