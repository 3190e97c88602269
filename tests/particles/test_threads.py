"""The one thread setting: capped by threadpoolctl's limits, and the exact pass on a thread pool over row
blocks giving the one-thread result (bit for bit on row blocks, to round-off on symmetric tiles)."""

import numpy as np
import pytest

import particles
from particles import sample_uniform
from particles._core import threads
from particles.summation import exp_sums
from particles.validation import InvalidParameterError

threadpoolctl = pytest.importorskip("threadpoolctl")


@pytest.fixture
def two_threads():
    with threadpoolctl.threadpool_limits(2):
        particles.set_num_threads(2)
        try:
            yield
        finally:
            particles.set_num_threads(None)


def test_one_setting_capped_by_threadpoolctl():
    try:
        particles.set_num_threads(3)
        with threadpoolctl.threadpool_limits(1):
            assert particles.num_threads() == 1
        with threadpoolctl.threadpool_limits(2):
            assert particles.num_threads() == 2
    finally:
        particles.set_num_threads(None)
    with pytest.raises(InvalidParameterError, match="'n' parameter of set_num_threads"):
        particles.set_num_threads(0)


@pytest.mark.parametrize("symmetric", [False, True])
def test_exact_pass_on_two_threads_gives_the_one_thread_result(rng, symmetric, two_threads, monkeypatch):
    x = sample_uniform(1500, 3, rng)
    BM = 6.0 * np.eye(3)[None]
    monkeypatch.setattr(threads, "MIN_PARALLEL_PAIRS", 1)  # pool every pass
    calls = []
    pool_map = threads.parallel_chunks

    def counting(items, work, pairs):
        calls.append(threads.num_threads())
        return pool_map(items, work, pairs)

    monkeypatch.setattr("particles._summation.exact.parallel_chunks", counting)
    two = exp_sums(BM, x, x, None, summation="exact", same_points=symmetric, symmetric=symmetric)[0]
    blas = threadpoolctl.threadpool_info()
    particles.set_num_threads(1)
    one = exp_sums(BM, x, x, None, summation="exact", same_points=symmetric, symmetric=symmetric)[0]
    assert calls == [2, 1]
    assert threadpoolctl.threadpool_info() == blas  # the BLAS limit is restored after the pass
    if symmetric:  # the tiles' partial sums are added in another order
        np.testing.assert_allclose(two.logz, one.logz, rtol=0, atol=1e-13)
        np.testing.assert_allclose(two.mean, one.mean, rtol=0, atol=1e-14)
    else:
        np.testing.assert_array_equal(two.logz, one.logz)
        np.testing.assert_array_equal(two.mean, one.mean)


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("b", [8, 16, 24, 48])
def test_snake_chunks_balance_the_tiles_of_a_triangle(k, b):
    """The symmetric pass's block row i holds b - i tiles: dealt in snake order over k threads every item is
    dealt once, in its order, and when b is a multiple of 2k each thread gets exactly b(b+1)/(2k) tiles (dealing in
    turn gives thread 0 b/2 more tiles than thread 1 at k = 2)."""
    chunks = threads.snake_chunks(list(range(b)), k)
    assert sorted(i for c in chunks for i in c) == list(range(b)) and all(c == sorted(c) for c in chunks)
    tiles = [sum(b - i for i in c) for c in chunks]
    if b % (2 * k) == 0:
        assert tiles == [b * (b + 1) // (2 * k)] * k
    assert max(tiles) - min(tiles) <= k
