r"""Sinkhorn (doubly stochastic) attention: the Sinkformer of Sander, Ablin, Blondel and Peyré
(arXiv:2110.11773), docs/theory.md "Sinkhorn attention".

The weights are k Sinkhorn normalisations of the kernel :math:`e^{\beta s_{ij}}`, alternately of the
rows (steps 1, 3, ...) and of the columns (steps 2, 4, ...): k = 1 is softmax's row normalisation
(bit for bit), and as k grows the plan tends to the doubly stochastic scaling :math:`A = D_1 K D_2`
(rows and columns summing to 1). With ``tol`` the normalisations go on, up to ``iterations``, until
every column sums to 1 within ``tol`` after a row step (a :class:`particles.SolverError` names the
cap if they do not). Head outputs :math:`f^h_i = \sum_j A^h_{ij}W_hx_j`, velocity
:math:`v_i = \sum_h f^h_i`.

Everything runs in the log domain (log-sum-exp normalisations of :math:`\beta s_{ij}`), so no β
overflows. The plan is dense: O(n²) memory per head, for n up to a few thousand. On a measure
:math:`\sum_j w_j\delta_{y_j}` (the Lagrangian scheme) the rows sum to 1 over :math:`w_jK_{ij}` and
the transport plan :math:`w_iA_{ij}` has both marginals w; n atoms of mass 1/n are the particles.

Built on :mod:`particles.extend` alone: one kind object, its exact and batched passes, its dense
weights (the causal mask: masked entries stay 0), the entropic energy of which the converged flow is
the gradient flow for symmetric :math:`M_h = W_h`, and refusals of the fast summation and of the grid
mean-field schemes that name the routes that apply.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from particles.extend import HeadSums, Kind, Refusal, register_kind
from particles.validation import NONE, AnyOf, Integer, Interval, InvalidParameterError, SolverError, declare

__all__ = ["Sinkhorn", "sinkhorn_plan"]

#: the tolerance and cap of the converged potentials of the energy
_ENERGY_TOL, _ENERGY_CAP = 1e-13, 100_000


def sinkhorn_plan(logits: np.ndarray, iterations: int, tol: float | None = None,
                  log_w: np.ndarray | None = None) -> np.ndarray:
    r"""The Sinkhorn plan A of the logits (last two axes (m, m); leading axes broadcast), by
    normalisations in the log domain: odd steps the rows (:math:`\sum_j A_{ij} = 1`), even steps the
    columns (:math:`\sum_i w_iA_{ij} = w_j`, w all 1 unless ``log_w``); ``iterations`` steps, or with
    ``tol`` up to them until every column is within ``tol`` after a row step. Entries of logit −inf
    (a mask) stay 0.

    >>> A = sinkhorn_plan(np.array([[2.0, 0.0], [0.0, 1.0]]), 51)
    >>> bool(np.allclose(A.sum(0), 1) and np.allclose(A.sum(1), 1))
    True
    """
    logA = logits if log_w is None else logits + log_w
    for step in range(1, iterations + 1):
        if step % 2:
            logA = logA - logsumexp(logA, axis=-1, keepdims=True)
            if tol is not None and _column_error(logA, log_w) <= tol:
                return np.exp(logA)
        else:
            logA = logA - _column_excess(logA, log_w)
    if tol is not None:
        raise SolverError(f"Sinkhorn attention did not reach tol={tol:g} in {iterations} normalisations (column "
                          f"error {_column_error(logA, log_w):.3g}): raise iterations or tol.")
    return np.exp(logA)


def _column_excess(logA: np.ndarray, log_w: np.ndarray | None) -> np.ndarray:
    """log of (Σ_i w_i A_ij) / w_j, shape (..., 1, m); 0 for an atom of no mass (its column is 0)."""
    if log_w is None:
        return logsumexp(logA, axis=-2, keepdims=True)
    col = logsumexp(logA + np.swapaxes(log_w, -1, -2), axis=-2, keepdims=True) - log_w
    return np.where(np.isfinite(log_w), col, 0.0)


def _column_error(logA: np.ndarray, log_w: np.ndarray | None) -> float:
    return float(np.max(np.abs(np.expm1(_column_excess(logA, log_w)))))


@declare(iterations=Integer(1), tol=AnyOf(NONE, Interval(0, 1, closed="neither")))
@dataclass(frozen=True)
class Sinkhorn(Kind):
    r"""Sinkhorn attention: k normalisations of :math:`e^{\beta s_{ij}}` (module docstring).

    Parameters
    ----------
    iterations : int
        The number k of normalisations (rows, columns, rows, ...): k = 1 is softmax; with ``tol``, the cap.
    tol : float or None
        Stop, after a row step, once every column sums to 1 within ``tol`` (None: exactly ``iterations``).

    Examples
    --------
    >>> from particles import MultiHead
    >>> w = MultiHead(np.eye(3), beta=2.0, kind=Sinkhorn(iterations=40, tol=1e-12)).weights(np.eye(3))
    >>> bool(np.allclose(w.sum(axis=1), 1.0, atol=1e-12))  # columns too: doubly stochastic
    True
    """

    name: str = "sinkhorn"
    iterations: int = 3
    tol: float | None = None
    weighted = True
    fast = Refusal("summation='fast' cannot run Sinkhorn attention: its normalisations need the dense plan. Use "
                   "summation='exact' or 'auto' (the exact pass).")
    mean_field = Refusal("the grid mean-field schemes (fv_circle, fv_sphere, jko, spectral) know the exponential "
                         "kernels only; Sinkhorn attention's mean field runs by scheme='lagrangian' (weighted atoms).")

    @property
    def exps_per_pair(self) -> int:
        return self.iterations + 1

    def plan(self, logits: np.ndarray, log_w: np.ndarray | None = None) -> np.ndarray:
        """The attention plan of these logits (:func:`sinkhorn_plan` with the kind's parameters)."""
        return sinkhorn_plan(logits, self.iterations, self.tol, log_w)

    def exact(self, model, x, sources, weights, transpose):
        if sources is not None and not (sources is x or np.array_equal(sources, x)):
            raise InvalidParameterError("Sinkhorn attention normalises over the tokens both ways: its sums run over "
                                        "the atoms themselves (omit sources, or pass the targets).")
        log_w = None
        if weights is not None:
            with np.errstate(divide="ignore"):
                log_w = np.log(weights)[None, :]
        M = model.M.transpose(0, 2, 1) if transpose else model.M
        return [_sums(self.plan(model.beta * (x @ M[h] @ x.T), log_w), x) for h in range(model.n_heads)]

    def ensemble(self, left, xs):
        return _sums(self.plan(left @ xs.transpose(0, 2, 1)), xs)

    def output(self, p, Wt, n, c):
        return p.mean @ Wt

    def scale(self, n):
        return 1.0

    def dense(self, s):
        return self.plan(s)

    def energy(self, model, x):
        r""":math:`F = -\frac{1}{2\beta}\sum_h \mathrm{OT}^h(\mu_n, \mu_n)`, the entropic self-transport of the
        tokens' measure under the cost :math:`-\beta s^h` (ε = 1), from converged potentials; β > 0."""
        x = model.check_x(x)
        if model.beta <= 0:
            raise InvalidParameterError("the Sinkhorn energy needs beta > 0 (its cost is -beta s).")
        n = x.shape[0]
        total = 0.0
        for Mh in model.M:
            K = model.beta * (x @ Mh @ x.T) - np.log(n)
            f, g = np.zeros(n), np.zeros(n)
            for _ in range(_ENERGY_CAP):
                f = -logsumexp(K + g[None, :], axis=1)
                g_new = -logsumexp(K + f[:, None], axis=0)
                done = np.max(np.abs(g_new - g)) <= _ENERGY_TOL
                g = g_new
                if done:
                    break
            total += (f.sum() + g.sum()) / n
        return -total / (2 * model.beta)


def _sums(A: np.ndarray, y: np.ndarray) -> HeadSums:
    return HeadSums(mean=A @ y, total=A.sum(axis=-1))


register_kind(Sinkhorn())
