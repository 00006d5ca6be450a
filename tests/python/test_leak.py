"""No leak over 10,000 steps: Python's own allocations (tracemalloc) and
the process's resident memory stay flat after a warm-up, through dense,
sparse and absent gradients, refused calls, weights read and set, and
optimizers, Variables and schedules made and dropped."""
import tracemalloc

import numpy as np

import optim


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def work(opt, w, e, b, k):
    rows = optim.IndexedSlices(np.ones((3, 4)), np.array([k % 6, 1, k % 6], np.int32))
    opt.apply_gradients([(np.full((16, 8), 0.01, np.float32), w), (rows, e),
                         (None if k % 2 else np.ones(()), b)])
    if k % 50 == 0:
        try:
            opt.apply_gradients([(np.ones((16, 8), np.float64), w)])
        except optim.Error:
            pass
        opt.set_weights(opt.get_weights())
        opt.get_config()
        s = optim.schedules.CosineDecay(0.1, 100)
        o2 = optim.Adam(learning_rate=s, clipnorm=1.0)
        v = optim.Variable(np.zeros(5, np.float32), name="v")
        o2.apply_gradients([(np.ones(5, np.float32), v)])
        opt.learning_rate = 0.01


def test_no_leak_over_10000_steps():
    optim.set_num_threads(1)  # steps of a few hundred elements: no thread wake-ups to wait for
    opt = optim.Adam(learning_rate=0.01)
    w, e, b = np.zeros((16, 8), np.float32), np.zeros((6, 4)), np.zeros(())
    for k in range(500):
        work(opt, w, e, b, k)
    tracemalloc.start()
    rss0 = rss_bytes()
    t0 = tracemalloc.take_snapshot()
    for k in range(500, 10_500):
        work(opt, w, e, b, k)
    t1 = tracemalloc.take_snapshot()
    rss1 = rss_bytes()
    tracemalloc.stop()
    optim.set_num_threads(0)
    grown = sum(s.size_diff for s in t1.compare_to(t0, "filename"))
    assert opt.iterations == 10_500
    assert grown < 64 * 1024, "Python allocations grew %d bytes" % grown
    assert rss1 - rss0 < 4 << 20, "resident memory grew %d bytes" % (rss1 - rss0)
