r"""Quantile functions of smooth densities: Hermite inversion of a CDF and the error of a linear
quantile interpolant (the spectral references' transport, :mod:`metrics.spectral_reference`)."""

from __future__ import annotations

import numpy as np

__all__ = ["hermite_inverse", "interpolation_sq"]


def hermite_inverse(x, G, g, s):
    """Solve G(t) = s on the grid x with the cubic Hermite interpolant of (G, g = G'), Newton in each cell."""
    k = np.clip(np.searchsorted(G, s, side="right") - 1, 0, len(x) - 2)
    h = x[k + 1] - x[k]
    G0, G1, d0, d1 = G[k], G[k + 1], h * g[k], h * g[k + 1]
    span = np.where(G1 > G0, G1 - G0, 1.0)
    tau = np.clip((s - G0) / span, 0.0, 1.0)
    # the Hermite cubic in powers of tau: H = G0 + tau (d0 + tau (c2 + tau c3))
    c2 = 3 * (G1 - G0) - 2 * d0 - d1
    c3 = 2 * (G0 - G1) + d0 + d1
    r = G0 - s
    for _ in range(6):  # Newton from the linear guess: quadratic convergence, 3-4 steps reach round-off
        H = r + tau * (d0 + tau * (c2 + tau * c3))
        dH = d0 + tau * (2 * c2 + 3 * tau * c3)
        step = H / np.where(dH > 0, dH, span)
        tau = np.clip(tau - step, 0.0, 1.0)
        if np.max(np.abs(step)) < 1e-15:
            break
    return x[k] + h * tau


def interpolation_sq(levels, nodes, mids):
    r"""Estimate of :math:`\|Q - \hat Q\|_{L^2}^2`, :math:`\hat Q` the linear interpolant of the quantile
    function Q at ``levels``, from the deviations δ_j of Q at the cell midpoints. Where Q is smooth the
    error on a cell of width w is :math:`\tfrac{Q''}{2}(s - s_j)(s - s_{j+1})`, so :math:`\int e^2 =
    \tfrac{8}{15}\, w\, \delta_j^2`. In the two end cells Q may have an infinite slope: the projection of a
    density on :math:`S^{d-1}` vanishes like :math:`(1 - t^2)^{(d-3)/2}` at ±1, so
    :math:`Q \approx Q_0 + a s^\alpha`, :math:`\alpha = 2/(d-1)`, for which :math:`\int e^2 \le
    \tfrac43 w \delta^2` for every :math:`\alpha \in (0, 1]`. Both are asymptotic estimates, taken with
    a factor 2 on δ (the graded levels of d ≥ 4 make the end-cell terms negligible)."""
    delta = mids - 0.5 * (nodes[:-1] + nodes[1:])
    sq = 32.0 / 15.0 * delta**2
    sq[[0, -1]] = 16.0 / 3.0 * delta[[0, -1]] ** 2
    return float(np.diff(levels) @ sq)
