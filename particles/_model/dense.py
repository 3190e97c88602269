r"""Dense (n × n) scores and attention weights of a :class:`~particles.MultiHead`, for small n.

O(H n²) memory: the reference the blocked and fast sums are tested against, and the only
evaluation of causal masks.
"""

from __future__ import annotations

import numpy as np

from .._core.declarations import declare
from .._core.errors import SolverError
from .._core.numerics import LOG_OVERFLOW, scalar_of
from .fields import STATE
from .kinds import consensus_rate, usa_overflow_message

__all__ = ["DenseMixin"]


class DenseMixin:
    """Dense methods of :class:`~particles.MultiHead` (they need ``check_x``, ``_score_scale``, ``M``, ``W``,
    ``beta``, ``kind``, ``causal``, ``variant``, ``geom`` and ``log_time_scale`` of the model), and the rate of
    its dynamics at consensus."""

    def consensus_rate(self) -> float | None:
        r"""The rate r at which tokens near one point of the sphere contract to it
        (:func:`~particles._model.kinds.consensus_rate`: :math:`\sum_h w_h` for softmax,
        :math:`\sum_h w_h e^{\beta m_h - c}` for USA, c the log time scale), for scalar heads
        :math:`M_h = m_hI`, :math:`W_h = w_hI` with :math:`m_h, w_h \ge 0` on the sphere, the standard update
        and no causal mask; None otherwise. :func:`particles.simulate` warns where a fixed step dt puts dt·r
        beyond its method's stability interval."""
        if self.variant or not self.geom.on_sphere:
            return None
        heads = [(scalar_of(m), scalar_of(w)) for m, w in zip(self.M, self.W)]
        rate = consensus_rate(self.attention, heads, self.beta, self.attention.time_shift(self.log_time_scale))
        return None if rate is None else float(rate)

    def scores(self, x) -> np.ndarray:
        r"""Dense scores :math:`s^h_{ij}`, shape (H, n, n). O(H n²) memory: for small n."""
        x = self.check_x(x)
        return np.einsum("id,hde,je->hij", x, self.M, x)

    @declare(x=STATE)
    def weights(self, x) -> np.ndarray:
        r"""Dense attention weights of the model's kind, shape (H, n, n) (for small n).

        USA: :math:`e^{\beta s}` (times :math:`e^{-c}`); softmax: row-stochastic;
        ReLU: :math:`\mathrm{ReLU}(\beta s)/n`; row-normalised ReLU: rows sum to 1 or 0.
        The velocity is ``P_x (scale * Σ_h weights[h] @ x @ W[h].T)`` with scale 1/n for USA.
        With ``causal=True`` the weights of j > i are zero (softmax rows normalised over j <= i).
        """
        return self._dense_weights(self.check_x(x))

    def _dense_weights(self, x: np.ndarray) -> np.ndarray:
        s = self._score_scale() * np.einsum("id,hde,je->hij", x, self.M, x)
        if self.causal:
            n = x.shape[0]
            s = np.where(np.tril(np.ones((n, n), dtype=bool))[None], s, -np.inf)
        if self.attention.partition:
            s = s - self.log_time_scale
            top = float(s.max())
            if top > LOG_OVERFLOW:  # the same refusal as the velocity: no inf weights
                raise SolverError(usa_overflow_message(int(np.argmax(s.reshape(len(s), -1).max(axis=1))), top,
                                                       self.beta, x))
        return self.attention.dense(s)
