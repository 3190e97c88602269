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
    x = sample_uniform(n, d, rng)
    M = random_symmetric(rng, 1, d)[0]
    L = x @ (beta * M)
    tiles = exact_exp_sums(L, x, None, block, symmetric=True)
    rows = exact_exp_sums(L, x, None, block)
    assert np.all(np.isfinite(tiles.logz)) and np.all(np.isfinite(tiles.mean))
    np.testing.assert_allclose(tiles.logz, rows.logz, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(tiles.mean, rows.mean, rtol=0, atol=1e-12)
