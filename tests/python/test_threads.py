"""Steps release the GIL: another Python thread runs while a long step is
in the library. Calls on one optimizer from several threads wait for each
other (the library's optimizer is not thread-safe) and give the serial
result."""
import threading
import time

import numpy as np

import optim


def coverage(stamps, t0, t1, gap=0.02):
    """The part of [t0, t1] where the other thread ticked at least every `gap` s."""
    points = [t0] + [s for s in stamps if t0 < s < t1] + [t1]
    return sum(b - a for a, b in zip(points, points[1:]) if b - a < gap) / (t1 - t0)


def timed_steps(n):
    """Four Adam steps on n float32 elements while another thread ticks:
    (the steps' (start, end), the tick times)."""
    w = np.zeros(n, np.float32)
    g = np.ones(n, np.float32)
    opt = optim.Adam(learning_rate=0.01)
    opt.apply_gradients([(g, w)])  # slots made: the steps below are steps only
    stamps, stop = [], threading.Event()

    def tick():  # each tick needs the GIL back after a 1 ms sleep
        while not stop.is_set():
            time.sleep(0.001)
            stamps.append(time.perf_counter())

    t = threading.Thread(target=tick)
    t.start()
    time.sleep(0.05)
    spans = []
    for _ in range(4):
        t0 = time.perf_counter()
        opt.apply_gradients([(g, w)])
        spans.append((t0, time.perf_counter()))
    stop.set()
    t.join()
    return spans, stamps


def test_another_thread_runs_during_a_step():
    # Steps long enough to tell: 16M elements take 13 ms on an idle 2-core
    # Xeon and 60 ms loaded; grow until the longest takes 40 ms.
    for n in (16_000_000, 32_000_000, 64_000_000):
        spans, stamps = timed_steps(n)
        longest = max(b - a for a, b in spans)
        if longest > 0.04:
            break
    # A step that held the GIL would leave one gap as long as itself.
    best = max(coverage(stamps, a, b) for a, b in spans)
    assert longest > 0.04, "the steps are too short to tell (%.3f s)" % longest
    assert best > 0.5, "the other thread ticked through at most %.0f%% of a step of %.3f s" % (
        100 * best, longest)


def test_concurrent_calls_on_one_optimizer_are_serialised():
    opt = optim.SGD(learning_rate=0.5)
    ws = [np.zeros(1000) for _ in range(4)]
    g = np.ones(1000)
    for w in ws:  # every variable known first, so the threads only step
        opt.apply_gradients([(np.zeros(1000), w)])

    def work(w):
        for _ in range(200):
            opt.apply_gradients([(g, w)])

    threads = [threading.Thread(target=work, args=(w,)) for w in ws]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert opt.iterations == 4 + 4 * 200
    for w in ws:
        assert np.all(w == -100.0)


def test_concurrent_new_variables_get_distinct_names():
    opt = optim.SGD(learning_rate=0.1)
    arrays = [np.zeros(10) for _ in range(64)]

    def work(chunk):
        for a in chunk:
            opt.apply_gradients([(np.ones(10), a)])

    threads = [threading.Thread(target=work, args=(arrays[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = [v.name for v in opt.variables]
    assert len(names) == 64 and len(set(names)) == 64
    assert all(np.all(a == -0.1) for a in arrays)
