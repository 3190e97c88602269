"""Row-wise dot products (particles._core.numerics.rowdot): both paths, on either side of the cache rule."""

import numpy as np
import pytest

from particles._core.numerics import ROWDOT_CACHED, rowdot


@pytest.mark.parametrize("d", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("rows", [7, ROWDOT_CACHED // 3 + 11, ROWDOT_CACHED + 5])  # below and above the rule
def test_rowdot_is_the_dot_product_of_each_row(rng, d, rows):
    """Each entry is <a_i, b_i> to a few ulps of the sum of |a_ik b_ik| (against long-double sums), whichever
    path the shape takes (the coordinate loop for d <= FEW_COORDS in cache, einsum otherwise)."""
    a = rng.standard_normal((rows, d))
    b = rng.standard_normal((rows, d))
    exact = np.sum(a.astype(np.longdouble) * b.astype(np.longdouble), axis=-1)
    scale = np.sum(np.abs(a * b), axis=-1)
    got = rowdot(a, b)
    assert got.shape == (rows,)
    assert np.all(np.abs(got - exact.astype(float)) <= 4 * d * np.finfo(float).eps * scale)
    # a stack of systems (S, n, d) gives the same rows
    stacked = rowdot(a[: rows // 7 * 7].reshape(7, -1, d), b[: rows // 7 * 7].reshape(7, -1, d))
    np.testing.assert_allclose(stacked.ravel(), got[: rows // 7 * 7], rtol=0,
                               atol=4 * d * np.finfo(float).eps * scale.max())
