r"""Degree amplitudes of an empirical measure, and its exact sliced distance to the uniform measure on S^2.

The observables of the chaos horizon (:mod:`metrics._statistics.horizon` holds their theory): with a
real orthonormal basis :math:`\{Y_{lm}\}_m` of the degree-l harmonics in :math:`L^2(\sigma)`,
:math:`A_l(\mu) = (\sum_m (\int Y_{lm}\,d\mu)^2)^{1/2}`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import sph_harm_y

from particles import check_points
from particles.validation import Integer, InvalidParameterError, Points, declare, keyword_only

__all__ = ["harmonic_multiplicity", "harmonic_amplitudes", "sliced_w2_to_uniform_s2"]


@keyword_only("d")
@declare(l=Integer(1), d=Integer(2, 3, hint="Harmonic amplitudes are implemented on S^1 and S^2."))
def harmonic_multiplicity(l: int, *, d: int) -> int:
    r"""Number :math:`k_l` of real degree-l harmonics on :math:`S^{d-1}`, d = 2 or 3.

    Examples
    --------
    >>> harmonic_multiplicity(1, d=2), harmonic_multiplicity(2, d=3)
    (2, 5)
    """
    return 2 if d == 2 else 2 * l + 1


@declare(l_max=Integer(1, hint="The highest degree recorded, e.g. 6."))
def harmonic_amplitudes(x, l_max: int) -> np.ndarray:
    r"""Degree amplitudes :math:`A_l(\mu_n)`, l = 0..l_max, of the empirical measure of x (module docstring).

    Index l is degree l, as in :func:`meanfield.growth_rates` (``A[l]`` pairs with ``sigma[l]``);
    :math:`A_0 = 1` (the constant part of a probability measure). On :math:`S^1`:
    :math:`A_l = \sqrt2\,|\frac1n\sum_j e^{il\theta_j}|` for l >= 1. On :math:`S^2`:
    :math:`A_l^2 = 4\pi\sum_{m=-l}^{l}|\frac1n\sum_j Y_l^m(x_j)|^2` with the complex harmonics of
    ``scipy.special.sph_harm_y`` (orthonormal for the surface measure; the unitary change to the
    real basis keeps the norm over m). Cost O(n l_max) on S^1, O(n l_max²) on S^2.

    Parameters
    ----------
    x : ndarray of shape (n, d), unit rows, d = 2 or 3
    l_max : int >= 1

    Returns
    -------
    ndarray of shape (l_max + 1,)
        ``A[l]`` for degrees l = 0, 1, ..., l_max.

    Examples
    --------
    >>> theta = 2 * np.pi * np.arange(8) / 8            # equally spaced: a_l = 0 unless 8 | l
    >>> A = harmonic_amplitudes(np.stack([np.cos(theta), np.sin(theta)], 1), 8)
    >>> float(A[0]), bool(np.allclose(A[1:8], 0, atol=1e-12)), bool(np.isclose(A[8], np.sqrt(2)))
    (1.0, True, True)
    """
    caller = "harmonic_amplitudes"
    x = check_points(x, "x", caller, atol=1e-8, min_n=2)  # (one token: A_l = sqrt(k_l), a fact of no measure)
    n, d = x.shape
    out = np.empty(l_max + 1)
    if d == 2:
        z = x[:, 0] + 1j * x[:, 1]
        # powers by repeated multiplication stay on the unit circle to round-off
        out[0], zl = 1.0, np.ones(n, dtype=complex)  # (degree 0 is one real function, not a cos/sin pair)
        for l in range(1, l_max + 1):
            zl = zl * z
            out[l] = np.sqrt(2.0) * abs(zl.mean())
        return out
    if d != 3:
        raise InvalidParameterError(
            f"x of {caller} must lie on S^1 or S^2 (d = 2 or 3); got d = {d}. Harmonic amplitudes on "
            "higher spheres are not implemented.")
    polar = np.arccos(np.clip(x[:, 2], -1.0, 1.0))
    azim = np.arctan2(x[:, 1], x[:, 0])
    for l in range(l_max + 1):
        s = sum(abs(sph_harm_y(l, m, polar, azim).mean()) ** 2 for m in range(-l, l + 1))
        out[l] = np.sqrt(4 * np.pi * s)
    return out


@declare(x=Points(atol=1e-8, d=3, hint="Tokens on S^2."), directions=Points(atol=1e-8, d=3, hint="Directions on S^2."))
def sliced_w2_to_uniform_s2(x, directions) -> float:
    r"""Sliced :math:`SW_2(\mu_n, \sigma)` on :math:`S^2` over the given unit directions, exact per direction.

    The projection of σ on a unit axis is uniform on [-1, 1], with quantile function
    :math:`q(s) = 2s - 1`; with the sorted projections :math:`p_{(k)}` of the n tokens,

    .. math:: W_2^2 = \sum_{k} \int_{k/n}^{(k+1)/n} (p_{(k)} - 2s + 1)^2\,ds
       = \frac1n\sum_k \Big[\big(p_{(k)} + 1 - \tfrac{2k+1}{n}\big)^2 + \frac{1}{3n^2}\Big],

    and :math:`SW_2 = (\text{mean over directions of } W_2^2)^{1/2}`.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> u = rng.standard_normal((20000, 3)); u /= np.linalg.norm(u, axis=1, keepdims=True)
    >>> e = np.eye(3)
    >>> bool(sliced_w2_to_uniform_s2(u, e) < 0.02), bool(sliced_w2_to_uniform_s2(e[[2]], e[[2]]) > 1.1)
    (True, True)
    """
    n = len(x)
    p = np.sort(x @ directions.T, axis=0)  # (n, L)
    mid = (2 * np.arange(n) + 1) / n - 1.0
    w2 = np.mean((p - mid[:, None]) ** 2, axis=0) + 1.0 / (3 * n * n)
    return float(np.sqrt(w2.mean()))
