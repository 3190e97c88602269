r"""Funk–Hecke coefficients at any d (log form) and the head structures the spectral solvers accept
(module docstring of :mod:`meanfield.spectral`)."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, ive

from particles.extend import LOG_OVERFLOW, scaled_rotation_of
from particles.validation import (
    Checked,
    Integer,
    Interval,
    InvalidParameterError,
    check_real_array,
    declare,
    keyword_only,
)

# ------------------------------------------------------------------ Funk–Hecke coefficients at any d


def _degrees(l, name, caller):
    l = np.atleast_1d(check_real_array(l, name, caller, ndim=(0, 1), expected="degrees l >= 0"))
    if np.any(l < 0) or np.any(l != np.round(l)):
        raise InvalidParameterError(f"{name} must hold non-negative integers; got {l}.")
    return l


@keyword_only("l", "d")
@declare(a=Interval(), l=Checked(_degrees, "non-negative integer degrees (a scalar or a 1-D array)",
                                 [-1, [0.5], [[1]], None, "l", [np.nan]]), d=Integer(2))
def funk_hecke_log(a: float, *, l, d: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Sign and log of the Funk–Hecke coefficients :math:`\hat g_a(l)` of :math:`e^{a t}` on
    :math:`S^{d-1}`, without overflow or underflow at any d.

    .. math:: \hat g_a(l) = \Gamma(\nu+1)\Big(\frac2a\Big)^{\nu} I_{l+\nu}(a)
       = \Gamma(\nu+1)\Big(\frac a2\Big)^{l}\sum_{k\ge0}\frac{(a/2)^{2k}}{k!\,\Gamma(l+\nu+k+1)},
       \qquad \nu = \frac{d-2}{2},

    from the scaled Bessel function ``ive`` where it does not underflow, else from the series in
    log-sum-exp form (positive terms: no cancellation), which covers d up to thousands.

    Examples
    --------
    >>> s, g = funk_hecke_log(1.0, l=[0, 1], d=3)
    >>> bool(np.allclose(s * np.exp(g), [np.sinh(1.0), np.cosh(1.0) - np.sinh(1.0)]))
    True
    """
    return _fh_log(a, l, d)


def _fh_log(a: float, l: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    l = np.asarray(l, dtype=float)
    nu = (d - 2) / 2
    b = abs(a)
    sign = np.where((a < 0) & (l % 2 == 1), -1.0, 1.0)
    if b == 0:
        return sign, np.where(l == 0, 0.0, -np.inf)
    with np.errstate(divide="ignore"):
        direct = gammaln(nu + 1) + nu * np.log(2 / b) + np.log(ive(l + nu, b)) + b
    bad = ~np.isfinite(direct) | (ive(l + nu, b) < 1e-250)
    if np.any(bad):
        # Σ_k (b/2)^{2k}/(k! Γ(l+ν+k+1)): the terms peak near k ~ b/2; enough terms past the peak
        K = int(b / 2 + 12 * np.sqrt(b + 1) + 40)
        k = np.arange(K)[:, None]
        lb = l[bad][None, :]
        terms = 2 * k * np.log(b / 2) - gammaln(k + 1) - gammaln(lb + nu + k + 1)
        top = terms.max(0)
        series = top + np.log(np.exp(terms - top).sum(0))
        direct[bad] = gammaln(nu + 1) + lb[0] * np.log(b / 2) + series
    return sign, direct


# ------------------------------------------------------------------ heads


def _rotation_heads(model, caller):
    """(λ, α, μ, γ) per head when every M_h = λ R(α) and W_h = μ R(γ) on S^1."""
    out = []
    for M, W in zip(model.M, model.W):
        rotations = scaled_rotation_of(M), scaled_rotation_of(W)
        if None in rotations:
            raise InvalidParameterError(
                f"scheme 'spectral' on S^1 ({caller}) needs heads that are scaled rotations, "
                "M_h = lambda R(alpha) and W_h = mu R(gamma) (e.g. MultiHead.scalar): only then is the velocity a "
                "circular convolution; use scheme='fv_circle' for general 2 x 2 heads."
            )
        out.append(rotations[0] + rotations[1])
    return out


def _usa_scale(model, a):
    scale = abs(a) - model.log_time_scale
    if scale > LOG_OVERFLOW:
        raise InvalidParameterError("USA velocity overflows: build the model with log_time_scale='auto'.")
    return math.exp(scale)
