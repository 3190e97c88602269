r"""Energies of a :class:`~particles.MultiHead` and their gradients (docs/theory.md §2).

:math:`E_h(X) = \frac{1}{2\beta n^2}\sum_{ij} e^{\beta s^h_{ij}}`, computed from the
summation layer's :math:`\log Z_i` (log-sum-exp, so finite log-energies at every β > 0),
and :math:`\nabla_{x_i}E_h` from the row sums of :math:`e^{\beta s}` and its transpose.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from .._core.declarations import declare
from .._core.errors import InvalidParameterError
from .._summation.exact import HeadSums
from .fields import STATE
from .kinds import safe_exp

__all__ = ["EnergiesMixin"]


class EnergiesMixin:
    """Energy methods of :class:`~particles.MultiHead` (they need ``check_x``, ``_exp_sums``,
    ``beta``, ``M``, ``log_time_scale``, ``symmetric`` and ``n_heads`` of the model)."""

    def log_head_energies(self, x) -> np.ndarray:
        r"""Log-energies :math:`\log E_h = \operatorname{logsumexp}_{ij}(\beta s^h_{ij}) - \log(2\beta n^2)`,
        shape (H,).

        Finite for every β > 0 (no overflow). At β = 0 the energy is infinite; use
        :meth:`head_energies`, which returns the finite part there.
        """
        x = self.check_x(x)
        if self.beta == 0:
            raise InvalidParameterError(
                "log_head_energies needs beta > 0 (E_h = +inf at beta = 0); use head_energies, "
                "which returns the finite part lim (E_h - 1/(2 beta)) there."
            )
        n = x.shape[0]
        return np.array([logsumexp(p.logz) for p in self._exp_sums(x)]) - np.log(2 * self.beta * n * n)

    def head_energies(self, x) -> np.ndarray:
        r"""Energies :math:`E_h = \frac{1}{2\beta n^2}\sum_{ij} e^{\beta s^h_{ij}}`, shape (H,).

        At β = 0 returns the finite part :math:`\lim_{\beta\to0}(E_h - \tfrac1{2\beta}) =
        \frac1{2n^2}\sum_{ij} s^h_{ij}`, which has the same time derivative. Values past
        float64 range are returned as +inf; use :meth:`log_head_energies` there.
        """
        x = self.check_x(x)
        if self.beta == 0:
            n = x.shape[0]
            xs = x.sum(axis=0)
            return np.einsum("d,hde,e->h", xs, self.M, xs) / (2 * n * n)
        return safe_exp(self.log_head_energies(x))

    @declare(x=STATE)
    def energy(self, x) -> float:
        r""":math:`E_{multi} = \sum_h E_h` (see :meth:`head_energies`)."""
        return float(np.sum(self.head_energies(x)))

    def energy_gradient(self, x) -> np.ndarray:
        r"""Euclidean gradient :math:`\nabla_{x_i} E_{multi}`, shape (n, d), times :math:`e^{-c}`.

        :math:`\nabla_{x_i} E_h = \frac{1}{2n^2}\big[Z_i M_h\bar x_i + Z'_i M_h^\top \bar x'_i\big]`
        with :math:`Z_i, \bar x_i` the partition function and softmax mean of row i of
        :math:`e^{\beta s}` and :math:`Z', \bar x'` those of its transpose. Under C3 this is
        :math:`f_i/n^2` for aligned USA heads. Entries past the float64 range are ±inf (never NaN),
        as :math:`E_h` is then; ``log_time_scale`` rescales them.
        """
        x = self.check_x(x)
        terms = [t for h_terms in self._gradient_terms(x, self._exp_sums(x)) for t in h_terms]
        # Σ over heads of e^{log z} g in the log domain: heads of opposite signs past float64 give
        # their signed sum (±inf), not inf − inf
        a = np.stack([np.broadcast_to(logz[:, None], g.shape) for logz, g in terms])
        log_abs, sign = _signed_logsumexp(a, np.stack([g for _, g in terms]), axis=0)
        return sign * safe_exp(log_abs)

    def _head_gradients(self, x: np.ndarray, sums: list[HeadSums]) -> np.ndarray:
        """∇E_h (times e^{-c}) of every head, shape (H, n, d), from the heads' exp sums."""
        return np.stack([sum(_scaled(logz, g) for logz, g in terms) for terms in self._gradient_terms(x, sums)])

    def _gradient_terms(self, x: np.ndarray, sums: list[HeadSums]) -> list:
        """Per head, the terms (log z_i, g_i) of ∇_{x_i}E_h = Σ_terms e^{log z_i} g_i (times e^{-c}): one
        term if M_h is symmetric (s_ji = s_ij: both halves coincide), else the row and column halves
        (the transposed sums are computed only then)."""
        n = x.shape[0]
        if self.symmetric:
            c = self.log_time_scale + 2 * np.log(n)
            return [[(p.logz - c, p.mean @ self.M[h].T)] for h, p in enumerate(sums)]
        sums_t = self._exp_sums(x, transpose=True)
        c = self.log_time_scale + np.log(2 * n * n)
        return [[(p.logz - c, p.mean @ self.M[h].T), (q.logz - c, q.mean @ self.M[h])]
                for h, (p, q) in enumerate(zip(sums, sums_t))]


def _signed_logsumexp(a: np.ndarray, b: np.ndarray, axis=None) -> tuple[np.ndarray, np.ndarray]:
    """(log|Σ b e^a|, sign of the sum) along ``axis``; an exactly zero sum gives (-inf, 0).

    Terms with b = 0 are dropped before the shift (scipy's ``logsumexp(..., b=, return_sign=True)``
    returns NaN when every b is 0 or the terms cancel exactly at large a).
    """
    a = np.where(b != 0, a, -np.inf)
    top = np.max(a, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    total = np.sum(b * np.exp(a - top), axis=axis)
    with np.errstate(divide="ignore"):
        log_abs = np.log(np.abs(total)) + np.squeeze(top, axis=axis)
    return log_abs, np.sign(total)


def _scaled(logz: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Rows e^{logz_i} g_i: ±inf where the product is past float64, exactly 0 where g_ij = 0 (never
    inf · 0 = NaN); the scale is folded into the log first so that no finite product overflows early."""
    out = np.zeros_like(g)
    nz = g != 0
    with np.errstate(over="ignore"):
        out[nz] = np.sign(g[nz]) * np.exp(np.broadcast_to(logz[:, None], g.shape)[nz] + np.log(np.abs(g[nz])))
    return out
