r"""The mean-field velocity and energy of a weighted measure (docs/theory.md §6).

For :math:`\mu = \sum_l w_l\delta_{y_l}` and query points :math:`x_k`:

- USA: :math:`v[\mu](x) = P_x\sum_h\sum_l w_l e^{\beta\langle x, M_h y_l\rangle} W_h y_l`;
- softmax: :math:`v[\mu](x) = P_x\sum_h
  \frac{\sum_l w_l e^{\beta\langle x, M_h y_l\rangle} W_h y_l}{\sum_l w_l e^{\beta\langle x, M_h y_l\rangle}}`;
- :math:`E_h[\mu] = \frac{1}{2\beta}\sum_{kl} w_k w_l e^{\beta\langle y_k, M_h y_l\rangle}`.

With n atoms of weight 1/n these are exactly the particle velocity and energy of
:class:`particles.MultiHead` (the finite-n flow is the mean-field flow of μ_n). The sums go
through the model's summation layer (:mod:`particles.summation`, the model's ``summation``
and ``tol``): exact row-blocked passes with a shifted exp (no overflow, O(m · block)
memory), or for large measures the NUFFT routes in O(m + n) with their error bound.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from particles import MultiHead
from particles.extend import LAGRANGIAN_KINDS, MEAN_FIELD_KINDS
from particles.validation import (
    NONE,
    POSITIVE_BETA,
    AnyOf,
    Boolean,
    Model,
    Points,
    Weights,
    declare,
    fits_model,
    one_per,
    weights_or_uniform,
)

__all__ = ["measure_velocity", "measure_energy", "first_variation"]

# the atoms and their masses; the model's geometry decides whether rows must be unit vectors (fits_model)
_MEASURE = dict(model=Model(kinds=MEAN_FIELD_KINDS), points=Points(on_sphere=False, min_d=1),
                weights=AnyOf(NONE, Weights(probability=True)))
_RELATIONS = [fits_model("points"), one_per("weights")]


@declare(**_MEASURE | {"model": Model(kinds=LAGRANGIAN_KINDS)}, at=AnyOf(NONE, Points(on_sphere=False, min_d=1)),
         relations=[*_RELATIONS, fits_model("at")])
def measure_velocity(model: MultiHead, points, weights=None, at=None) -> np.ndarray:
    r""":math:`v[\mu](x)` at the query points ``at`` (default: the atoms), shape (m, d).

    Examples
    --------
    >>> model = MultiHead(np.eye(2), beta=1.0, kind="softmax")
    >>> measure_velocity(model, np.eye(2)).shape
    (2, 2)
    """
    return weighted_velocity(model, points, weights_or_uniform(weights, len(points)), points if at is None else at)


def weighted_velocity(model: MultiHead, y: np.ndarray, w: np.ndarray, q: np.ndarray) -> np.ndarray:
    """v[μ] at q for validated atoms y with weights w (the Lagrangian field and the S^2 spectral solver of
    general heads: the atoms checked once, by the caller)."""
    # the kind's output rule on sums weighted by the masses (which carry the particles' 1/n)
    f = model.outputs(q, model.sums(q, sources=y, weights=w, check=False), check=False)
    return model.geom.project_tangent(q, f.sum(axis=0))


@declare(**_MEASURE, log=Boolean(), relations=[*_RELATIONS, POSITIVE_BETA])
def measure_energy(model: MultiHead, points, weights=None, *, log: bool = False):
    r""":math:`E_{multi}[\mu] = \sum_h \frac{1}{2\beta}\sum_{kl} w_k w_l e^{\beta s^h_{kl}}`
    (or its log with ``log=True``). Needs β > 0. +inf past the float64 range (β‖M‖ ≳ 700):
    ``log=True`` stays finite there."""
    y, w = points, weights_or_uniform(weights, len(points))
    keep = w > 0  # empty cells carry no energy; log 0 would be -inf on purpose, but skip them
    logs = [logsumexp(p.logz[keep] + np.log(w[keep])) for p in model.sums(y, sources=y, weights=w, check=False)]
    logE = logsumexp(logs) - np.log(2 * model.beta)
    if log:
        return float(logE)
    with np.errstate(over="ignore"):  # +inf past the float64 range, as documented
        return float(np.exp(logE))


@declare(**_MEASURE | {"model": Model(kinds=MEAN_FIELD_KINDS, symmetric=True)}, relations=[*_RELATIONS, POSITIVE_BETA])
def first_variation(model: MultiHead, points, weights=None) -> np.ndarray:
    r""":math:`\delta E/\delta p_k = \frac1\beta\sum_h\sum_l e^{\beta\langle y_k, M_h y_l\rangle}p_l` (symmetric M_h),
    times :math:`e^{-c}`; shape (m,). The JKO step uses :math:`w = -\delta E/\delta p`. Entries past
    the float64 range are +inf (use ``log_time_scale="auto"`` to rescale). A model with a non-symmetric
    :math:`M_h` is refused: its first variation has the two halves
    :math:`e^{\beta\langle y_k, M_h y_l\rangle}` and :math:`e^{\beta\langle y_l, M_h y_k\rangle}`, not this sum."""
    y, w = points, weights_or_uniform(weights, len(points))
    out = np.zeros(len(y))
    with np.errstate(over="ignore"):  # +inf past the float64 range, as documented
        for p in model.sums(y, sources=y, weights=w, check=False):
            out += np.exp(p.logz - model.log_time_scale - np.log(model.beta))
    return out
