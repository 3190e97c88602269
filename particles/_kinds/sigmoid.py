r"""Sigmoid attention (Ramapuram et al., arXiv:2409.04431): weights :math:`\sigma(\beta s_{ij} + b)`,
no normalisation over j (docs/theory.md, "Sigmoid attention").

Head outputs :math:`f^h_i = \sum_j \sigma(\beta\langle x_i, M_h x_j\rangle + b)\,W_h x_j`, velocity
:math:`v_i = \sum_h f^h_i` (projected on the sphere), with the bias :math:`b = -\log n` by default
(n the number of tokens attended to), so that each weight is about :math:`e^{\beta s_{ij}}/n` while
:math:`e^{\beta s_{ij}} \ll n`. For symmetric :math:`M_h = W_h` the flow is the gradient flow
:math:`v = \tfrac{n^2}{2}\operatorname{grad} E` of the softplus energy
:math:`E = \frac{1}{\beta n^2}\sum_h\sum_{ij}\operatorname{softplus}(\beta s^h_{ij} + b)`.

On a measure :math:`\mu = \sum_j w_j\delta_{y_j}` of n atoms the pass weighs atom j by
:math:`n w_j` (1 for the particles' :math:`w_j = 1/n`), so that the Lagrangian mean-field scheme of n
atoms of mass 1/n is the particle flow: :math:`v[\mu](x) = \int n\,\sigma(\beta\langle x, My\rangle + b)
\,Wy\,d\mu(y)`, whose kernel :math:`n\sigma(\beta s - \log n) = e^{\beta s}/(1 + e^{\beta s}/n)`
tends to USA's :math:`e^{\beta s}` as n grows.

Built on :mod:`particles.extend` alone: one kind object, its exact pass (row-blocked, O(block)
memory), its batched pass for :class:`~particles.Ensemble`, its dense weights (the causal mask),
its energy, and refusals of the fast summation and of the grid mean-field schemes that name the
routes that apply.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from particles.extend import HeadSums, Kind, Refusal, register_kind, row_blocks
from particles.validation import NONE, AnyOf, Interval, InvalidParameterError, declare

__all__ = ["Sigmoid"]


@declare(bias=AnyOf(NONE, Interval(hint="None is -log n, n the number of tokens attended to.")))
@dataclass(frozen=True)
class Sigmoid(Kind):
    r"""Sigmoid attention :math:`\sigma(\beta\langle x_i, M x_j\rangle + b)` (module docstring).

    Parameters
    ----------
    bias : float or None
        The bias b; None (the default) is :math:`-\log n`, n the number of tokens attended to.

    Examples
    --------
    >>> from particles import MultiHead
    >>> w = MultiHead(np.eye(2), beta=0.0, kind="sigmoid").weights(np.eye(2))
    >>> bool(np.allclose(w, 1 / 3))  # sigma(-log 2) = 1/3
    True
    """

    name: str = "sigmoid"
    bias: float | None = None
    weighted = True
    fast = Refusal("summation='fast' needs exponential heads; sigmoid attention's weights sigma(beta s + b) are "
                   "not an exponential kernel and have no fast route. Use summation='exact' or 'auto' (the exact "
                   "pass).")
    mean_field = Refusal("the grid mean-field schemes (fv_circle, fv_sphere, jko, spectral) know the exponential "
                         "kernels only; sigmoid attention's mean field runs by scheme='lagrangian' (weighted atoms).")

    def bias_for(self, n: int) -> float:
        """The bias b at n tokens (:math:`-\\log n` unless set)."""
        return -float(np.log(n)) if self.bias is None else float(self.bias)

    def exact(self, model, x, sources, weights, transpose):
        y = x if sources is None else sources
        n = y.shape[0]
        w = None if weights is None else n * weights  # a measure's masses relative to the particles' 1/n
        M = model.M.transpose(0, 2, 1) if transpose else model.M
        return [_sigmoid_sums(x @ (model.beta * M[h]), y, w, self.bias_for(n), model.block_elements)
                for h in range(model.n_heads)]

    def ensemble(self, left, xs):
        a = expit(left @ xs.transpose(0, 2, 1) + self.bias_for(xs.shape[1]))
        return HeadSums(mean=a @ xs, total=a.sum(axis=-1))

    def output(self, p, Wt, n, c):
        return p.mean @ Wt

    def scale(self, n):
        return 1.0

    def dense(self, s):
        return expit(s + self.bias_for(s.shape[-1]))

    def energy(self, model, x):
        r""":math:`E = \frac{1}{\beta n^2}\sum_h\sum_{ij}\operatorname{softplus}(\beta s^h_{ij} + b)` (β > 0),
        of which the flow is :math:`\tfrac{n^2}{2}\operatorname{grad}E` for symmetric :math:`M_h = W_h`."""
        x = model.check_x(x)
        if model.beta <= 0:
            raise InvalidParameterError("the softplus energy needs beta > 0 (it is +inf at beta = 0).")
        n = x.shape[0]
        b = self.bias_for(n)
        total = 0.0
        for h in range(model.n_heads):
            left = x @ (model.beta * model.M[h])
            total += sum(float(np.logaddexp(0.0, left[rows] @ x.T + b).sum())
                         for rows in row_blocks(n, n, model.block_elements))
        return total / (model.beta * n * n)


def _sigmoid_sums(left: np.ndarray, y: np.ndarray, w: np.ndarray | None, b: float, block: int) -> HeadSums:
    """Row-blocked :math:`\\sum_j w_j\\sigma(\\langle L_i, y_j\\rangle + b)\\,y_j` and its row totals."""
    m, d = left.shape
    values = np.concatenate([y, np.ones((y.shape[0], 1))], axis=1)
    if w is not None:
        values *= w[:, None]
    out = np.empty((m, d + 1))
    for rows in row_blocks(m, y.shape[0], block):
        out[rows] = expit(left[rows] @ y.T + b) @ values
    return HeadSums(mean=out[:, :d], total=out[:, d])


register_kind(Sigmoid())
