"""The exact pass: the symmetric tiles (half the exps) against the row blocks, at every beta."""

import numpy as np
import pytest

from particles import sample_uniform
from particles._summation.exact import SYMMETRIC_SIDE, exact_exp_sums
from tests.helpers import random_symmetric


@pytest.mark.parametrize("beta", [1.0, 50.0, 400.0])
@pytest.mark.parametrize("block", [None, 5000])
def test_symmetric_tiles_match_the_row_pass(rng, beta, block):
    # several tiles and a partial last one; an anisotropic M at large beta makes the one global shift
    # overshoot most rows' maxima (those rows are redone with their own max: nothing under- or overflows)
    n, d = SYMMETRIC_SIDE * 2 + 77, 3
    x = sample_uniform(n, d=d, rng=rng)
    M = random_symmetric(rng, 1, d)[0]
    L = x @ (beta * M)
    tiles = exact_exp_sums(L, x, None, block, symmetric=True)
    rows = exact_exp_sums(L, x, None, block)
    assert np.all(np.isfinite(tiles.logz)) and np.all(np.isfinite(tiles.mean))
    np.testing.assert_allclose(tiles.logz, rows.logz, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(tiles.mean, rows.mean, rtol=0, atol=1e-12)


@pytest.mark.parametrize("symmetric", [True, False])
def test_chunks_sharing_one_pool_thread_keep_their_own_sums(rng, monkeypatch, symmetric):
    """Two chunks of a pass on a pool whose one worker runs both, one after the other (a thread pool may
    schedule so): each chunk's sums stay its own (an accumulator kept per thread would be wiped by the
    second chunk), so the pass equals the one-thread pass to round-off."""
    from concurrent.futures import ThreadPoolExecutor

    import particles
    from particles._core import threads

    n, d = 2500, 3
    x = sample_uniform(n, d=d, rng=rng)
    L = x @ (4.0 * random_symmetric(rng, 1, d)[0])
    particles.set_num_threads(1)
    try:
        one = exact_exp_sums(L, x, None, symmetric=symmetric)
        monkeypatch.setattr(threads, "_pools", {2: ThreadPoolExecutor(max_workers=1)})
        monkeypatch.setattr(threads, "_pool_limit", lambda: None)
        particles.set_num_threads(2)
        shared = exact_exp_sums(L, x, None, symmetric=symmetric)
    finally:
        particles.set_num_threads(None)
    np.testing.assert_allclose(shared.logz, one.logz, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(shared.mean, one.mean, rtol=0, atol=1e-12)
