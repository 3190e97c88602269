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
    x = sample_uniform(1500, d=3, rng=rng)
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


def _blas_limits():
    return {p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"}


@pytest.mark.parametrize("kind", ["softmax", "relu"])
def test_passes_with_threads_of_their_own_run_blas_on_one_thread(kind, two_threads, monkeypatch):
    """Inside an exp pass that runs its own threads (the energies' of every kind, the velocity's of the
    exp kinds) the BLAS pool is limited to one thread (a woken OpenBLAS worker would spin on the second
    core), while num_threads() still gives the pass its two; a ReLU velocity keeps the BLAS threads, its
    only parallelism. The limits are restored after."""
    seen = []

    def spy(name):
        def record(*args, **kwargs):
            seen.append((name, _blas_limits(), particles.num_threads()))
            x = args[1]  # the targets of exp_sums(BM, x, ...), the sources of relu_sums(L, x, ...)
            return ([particles.summation.HeadSums(mean=x, logz=np.zeros(len(x)))] if name == "exp"
                    else particles.summation.HeadSums(mean=x, total=np.ones(len(x))))
        return record

    monkeypatch.setattr("particles._model.passes.exp_sums", spy("exp"))
    monkeypatch.setattr("particles._model.kind_families.relu_sums", spy("relu"))  # (the ReLU family's pass)
    model = particles.MultiHead.scalar([1.0], d=3, beta=1.0, kind=kind)
    x = sample_uniform(1500, d=3, rng=np.random.default_rng(0))  # 1500^2 pairs: above MIN_PARALLEL_PAIRS
    assert _blas_limits() == {2}
    model.energy_sums(x)
    model.velocity(x)
    with threads.blas_single(10):  # a small pass changes nothing
        assert _blas_limits() == {2}
    quiet = {"softmax": {1}, "relu": {2}}[kind]
    assert seen == [("exp", {1}, 2), ("exp" if kind == "softmax" else "relu", quiet, 2)]
    assert _blas_limits() == {2} and particles.num_threads() == 2
    with threadpoolctl.threadpool_limits(1):  # one thread in all: nothing to keep quiet
        model.energy_sums(x)
    assert seen[-1] == ("exp", {1}, 1)
