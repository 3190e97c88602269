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

The continuum: a density stands for a number of tokens n that nothing in it fixes, and n enters the
kernel twice (the factor n and the default bias :math:`-\log n`), so the mean field of a measure takes
it from the kind: ``Sigmoid(tokens=n)`` weighs atom j by :math:`n w_j` with the bias :math:`-\log n`
(unless set) whatever the number of atoms, so the Lagrangian scheme of any number of atoms and the
spectral scheme solve the same flow; ``tokens=None`` (the default) is the number of atoms, and the
spectral scheme, which has no atoms, refuses it, naming the fix. For scalar heads the kernel is zonal:
the head's velocity is :math:`\mu_h\nabla_S\int G(\langle x, y\rangle)\,d\mu(y)` with the potential
:math:`G(t) = \frac{n}{a}\operatorname{softplus}(at + b)`, :math:`a = \beta\lambda_h`
(:meth:`Sigmoid.zonal_kernel`), whose Funk–Hecke coefficients the spectral scheme takes by quadrature.

Built on :mod:`particles.extend` alone: one kind object, its exact pass (row-blocked, O(block)
memory), its batched pass for :class:`~particles.Ensemble`, its dense weights (the causal mask),
its energy, its zonal kernel (the spectral mean field of scalar heads), and refusals of the fast
summation and of the finite-volume and JKO mean-field schemes that name the routes that apply.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from particles.extend import HeadSums, Kind, Refusal, register_kind, row_blocks
from particles.validation import NONE, AnyOf, Integer, Interval, InvalidParameterError, declare

__all__ = ["Sigmoid"]


@declare(bias=AnyOf(NONE, Interval(hint="None is -log n, n the number of tokens attended to.")),
         tokens=AnyOf(NONE, Integer(1, hint="None is the number of atoms of a measure.")))
@dataclass(frozen=True)
class Sigmoid(Kind):
    r"""Sigmoid attention :math:`\sigma(\beta\langle x_i, M x_j\rangle + b)` (module docstring).

    Parameters
    ----------
    bias : float or None
        The bias b; None (the default) is :math:`-\log n`, n the number of tokens attended to.
    tokens : int or None
        The number of tokens n a measure stands for in the mean field (module docstring): atom j weighs
        :math:`n w_j` and the default bias is :math:`-\log n`. None (the default): the number of atoms.
        The particle passes attend to their own tokens either way; the spectral scheme needs it.

    Examples
    --------
    >>> from particles import MultiHead
    >>> w = MultiHead(np.eye(2), beta=0.0, kind="sigmoid").weights(np.eye(2))
    >>> bool(np.allclose(w, 1 / 3))  # sigma(-log 2) = 1/3
    True
    """

    name: str = "sigmoid"
    bias: float | None = None
    tokens: int | None = None
    weighted = True
    fast = Refusal("summation='fast' needs exponential heads; sigmoid attention's weights sigma(beta s + b) are "
                   "not an exponential kernel and have no fast route. Use summation='exact' or 'auto' (the exact "
                   "pass).")
    mean_field = Refusal("the finite-volume and JKO mean-field schemes (fv_circle, fv_sphere, jko) know the "
                         "exponential kernels only; sigmoid attention's mean field runs by scheme='lagrangian' "
                         "(weighted atoms), or by scheme='spectral' with scalar heads (its zonal kernel, "
                         "kind=particles.Sigmoid(tokens=n)).")

    def bias_for(self, n: int) -> float:
        """The bias b at n tokens (:math:`-\\log n` unless set)."""
        return -float(np.log(n)) if self.bias is None else float(self.bias)

    def exact(self, model, x, sources, weights, transpose):
        y = x if sources is None else sources
        n = y.shape[0]
        if weights is not None:  # a measure of n tokens (tokens, else its atoms): masses relative to 1/n
            n = self.tokens or n
            weights = n * weights
        M = model.M.transpose(0, 2, 1) if transpose else model.M
        return [_sigmoid_sums(x @ (model.beta * M[h]), y, weights, self.bias_for(n), model.block_elements)
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

    def zonal_kernel(self, a):
        r"""The weight :math:`g(t) = n\sigma(at + b)`, the potential :math:`G(t) = \frac{n}{a}
        \operatorname{softplus}(at + b)` (:math:`G' = g`; :math:`n\sigma(b)\,t` at a = 0) and the energy kernel
        :math:`F(t) = \operatorname{softplus}(at + b)` of a scalar head of :math:`a = \beta\lambda` on a measure of
        n = ``tokens`` tokens (:meth:`Kind.zonal_kernel`): the head's velocity is
        :math:`\mu\int g\,P_xy\,d\mu = \mu\nabla_S\int G\,d\mu`, the energy :math:`\frac1\beta\sum_h\iint F\,d\mu\,d\mu`
        (the softplus energy on :math:`\mu_n`), of which the flow is :math:`v = \frac n2\nabla_S\frac{\delta E}
        {\delta\mu}` for :math:`\mu_h = \lambda_h`."""
        if self.tokens is None:
            raise InvalidParameterError(
                "the spectral mean field of sigmoid attention needs the number of tokens n the density stands "
                "for (its kernel is n sigma(beta s + b), b = -log n by default; a density has no atoms to count): "
                "build the model with kind=particles.Sigmoid(tokens=n), or run scheme='lagrangian'.")
        n, b = self.tokens, self.bias_for(self.tokens)
        g = lambda t: n * expit(a * np.asarray(t, dtype=float) + b)  # noqa: E731
        F = lambda t: np.logaddexp(0.0, a * np.asarray(t, dtype=float) + b)  # noqa: E731
        if a == 0:
            return g, (lambda t: n * expit(b) * np.asarray(t, dtype=float)), F
        return g, (lambda t: n / a * F(t)), F

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
