r"""The mean-field velocity and energy of a weighted measure (docs/theory.md §6).

For :math:`\mu = \sum_l w_l\delta_{y_l}` and query points :math:`x_k`:

- USA: :math:`v[\mu](x) = P_x\sum_h\sum_l w_l e^{\beta\langle x, M_h y_l\rangle} W_h y_l`;
- softmax: :math:`v[\mu](x) = P_x\sum_h \frac{\sum_l w_l e^{\beta\langle x, M_h y_l\rangle} W_h y_l}{\sum_l w_l e^{\beta\langle x, M_h y_l\rangle}}`;
- :math:`E_h[\mu] = \frac{1}{2\beta}\sum_{kl} w_k w_l e^{\beta\langle y_k, M_h y_l\rangle}`.

With n atoms of weight 1/n these are exactly the particle velocity and energy of
:class:`particles.MultiHead` (the finite-n flow is the mean-field flow of μ_n). Log-weights
enter the logits, so everything is computed by log-sum-exp in row blocks (no overflow,
O(m · block) memory).
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from particles import MultiHead
from particles.validation import InvalidParameterError, check_points, check_weights

__all__ = ["measure_velocity", "measure_energy", "first_variation"]

_BLOCK = 2**18


def _weighted_pass(model: MultiHead, h: int, q: np.ndarray, y: np.ndarray, logw: np.ndarray):
    """Row-blocked (log Z_k, mean_k) with Z_k = Σ_l w_l e^{β s(q_k, y_l)}, mean_k = Σ_l p_kl y_l."""
    m = q.shape[0]
    L = q @ (model.beta * model.M[h])
    B = max(1, min(m, _BLOCK // max(1, y.shape[0])))
    logz = np.empty(m)
    mean = np.empty((m, y.shape[1]))
    for s in range(0, m, B):
        T = L[s: s + B] @ y.T + logw[None, :]
        lz = logsumexp(T, axis=1)
        logz[s: s + B] = lz
        mean[s: s + B] = np.exp(T - lz[:, None]) @ y
    return logz, mean


def _prepare(model, points, weights, caller):
    if not isinstance(model, MultiHead):
        raise InvalidParameterError(f"model of {caller} must be a particles.MultiHead; got {type(model).__name__}.")
    if model.kind not in ("usa", "softmax"):
        raise InvalidParameterError(
            f"{caller} supports kinds 'usa' and 'softmax'; got {model.kind!r}."
        )
    y = model.check_x(points, "points")
    w = check_weights(weights, len(y), caller=caller)
    with np.errstate(divide="ignore"):
        # empty cells have weight 0: log 0 = −inf drops them from every sum, on purpose
        logw = np.log(w)
    return y, w, logw


def measure_velocity(model: MultiHead, points, weights=None, at=None) -> np.ndarray:
    r""":math:`v[\mu](x)` at the query points ``at`` (default: the atoms), shape (m, d).

    Examples
    --------
    >>> model = MultiHead(np.eye(2), beta=1.0, kind="softmax")
    >>> measure_velocity(model, np.eye(2)).shape
    (2, 2)
    """
    y, w, logw = _prepare(model, points, weights, "measure_velocity")
    q = y if at is None else check_points(at, "at", "measure_velocity", on_sphere=model.geom.on_sphere)
    return _velocity(model, y, logw, q)


def _velocity(model: MultiHead, y: np.ndarray, logw: np.ndarray, q: np.ndarray) -> np.ndarray:
    """v[μ] at q for validated atoms y with log-weights logw (also the Lagrangian field)."""
    v = np.zeros_like(q)
    for h in range(model.n_heads):
        logz, mean = _weighted_pass(model, h, q, y, logw)
        f = mean @ model.W[h].T
        if model.kind == "usa":
            f *= np.exp(logz - model.log_time_scale)[:, None]
        v += f
    return model.geom.project_tangent(q, v)


def measure_energy(model: MultiHead, points, weights=None, *, log: bool = False):
    r""":math:`E_{multi}[\mu] = \sum_h \frac{1}{2\beta}\sum_{kl} w_k w_l e^{\beta s^h_{kl}}`
    (or its log with ``log=True``). Needs β > 0."""
    y, w, logw = _prepare(model, points, weights, "measure_energy")
    if model.beta == 0:
        raise InvalidParameterError("measure_energy needs beta > 0 (the energy is +inf at beta = 0).")
    logs = [logsumexp(_weighted_pass(model, h, y, y, logw)[0] + logw) for h in range(model.n_heads)]
    logE = logsumexp(logs) - np.log(2 * model.beta)
    return float(logE) if log else float(np.exp(logE))


def first_variation(model: MultiHead, points, weights=None) -> np.ndarray:
    r""":math:`\delta E/\delta p_k = \frac1\beta\sum_h\sum_l e^{\beta\langle y_k, M_h y_l\rangle}p_l` (symmetric M_h),
    times :math:`e^{-c}`; shape (m,). The JKO step uses :math:`w = -\delta E/\delta p`."""
    y, w, logw = _prepare(model, points, weights, "first_variation")
    if model.beta == 0:
        raise InvalidParameterError("first_variation needs beta > 0.")
    out = np.zeros(len(y))
    for h in range(model.n_heads):
        logz, _ = _weighted_pass(model, h, y, y, logw)
        out += np.exp(logz - model.log_time_scale) / model.beta
    return out
