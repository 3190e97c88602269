r"""Energies of a :class:`~particles.MultiHead` and their gradients (docs/theory.md §2).

:math:`E_h(X) = \frac{1}{2\beta n^2}\sum_{ij} e^{\beta s^h_{ij}}`, computed from the
summation layer's :math:`\log Z_i` (log-sum-exp, so finite log-energies at every β > 0),
and :math:`\nabla_{x_i}E_h` from the row sums of :math:`e^{\beta s}` and its transpose.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from .._core.errors import InvalidParameterError
from .._summation.exact import HeadSums
from .kinds import safe_exp

__all__ = ["EnergiesMixin"]


class EnergiesMixin:
    """Energy methods of :class:`~particles.MultiHead` (they need ``check_x``, ``_exp_sums``,
    ``beta``, ``M``, ``log_time_scale``, ``symmetric`` and ``n_heads`` of the model)."""

    def log_head_energies(self, x) -> np.ndarray:
        r"""Log-energies :math:`\log E_h = \operatorname{logsumexp}_{ij}(\beta s^h_{ij}) - \log(2\beta n^2)`, shape (H,).

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

    def energy(self, x) -> float:
        r""":math:`E_{multi} = \sum_h E_h` (see :meth:`head_energies`)."""
        return float(np.sum(self.head_energies(x)))

    def energy_gradient(self, x) -> np.ndarray:
        r"""Euclidean gradient :math:`\nabla_{x_i} E_{multi}`, shape (n, d), times :math:`e^{-c}`.

        :math:`\nabla_{x_i} E_h = \frac{1}{2n^2}\big[Z_i M_h\bar x_i + Z'_i M_h^\top \bar x'_i\big]`
        with :math:`Z_i, \bar x_i` the partition function and softmax mean of row i of
        :math:`e^{\beta s}` and :math:`Z', \bar x'` those of its transpose. Under C3 this is
        :math:`f_i/n^2` for aligned USA heads.
        """
        x = self.check_x(x)
        return self._head_gradients(x, self._exp_sums(x)).sum(axis=0)

    def _head_gradients(self, x: np.ndarray, sums: list[HeadSums]) -> np.ndarray:
        """∇E_h (times e^{-c}) of every head, shape (H, n, d), from the heads' exp sums; the
        transposed sums only if some M_h ≠ M_hᵀ."""
        sums_t = None if self.symmetric else self._exp_sums(x, transpose=True)
        return np.stack([self._head_gradient(x, h, sums[h], None if sums_t is None else sums_t[h])
                         for h in range(self.n_heads)])

    def _head_gradient(self, x: np.ndarray, h: int, p: HeadSums, q: HeadSums | None) -> np.ndarray:
        n = x.shape[0]
        z = safe_exp(p.logz - self.log_time_scale)
        if q is None:
            # s_ji = s_ij and M^T = M: both halves of the gradient coincide
            return z[:, None] * (p.mean @ self.M[h].T) / (n * n)
        zq = safe_exp(q.logz - self.log_time_scale)
        return (z[:, None] * (p.mean @ self.M[h].T) + zq[:, None] * (q.mean @ self.M[h])) / (2 * n * n)
