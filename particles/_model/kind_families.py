r"""The built-in attention kinds: the exponential family (:class:`ExponentialKind`: USA and softmax,
whose sums come from the summation layer) and the ReLU family (ReLU and row-normalised ReLU, the
blocked ReLU row sums), each registered once (:func:`~particles._model.kinds.register_kind`).

References: docs/theory.md §1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from .._core.errors import InvalidParameterError
from .._core.numerics import LOG_OVERFLOW
from .._summation.exact import HeadSums, batched_exp_sums, batched_relu_sums, relu_sums
from .._summation.routes import fast_route
from .kinds import Kind, LogOverflow, Refusal, register_kind

__all__ = ["ExponentialKind"]


@dataclass(frozen=True)
class ExponentialKind(Kind):
    r"""The exponential family: weights from :math:`e^{\beta s_{ij}}`, whose sums
    :math:`(\log Z_i, S_i/Z_i)` come from the summation layer (exact, or the fast routes), whose
    batched pass is the shifted exp of :func:`~particles._summation.exact.batched_exp_sums`, and whose
    energy is :math:`E_{multi}` (docs/theory.md §2). A subclass states its output, scale, dense
    weights and mean-field rule."""

    weighted = True

    def exact(self, model, x, sources, weights, transpose):
        return model._exp_sums(x, sources=sources, weights=weights, transpose=transpose)

    def ensemble(self, left, xs):
        return batched_exp_sums(left, xs)

    def fast(self, M, beta, on_sphere):
        for h, Mh in enumerate(M):
            info = fast_route(beta * Mh, on_sphere)
            if info.route is None:
                raise InvalidParameterError(
                    f"summation='fast' cannot be used for head {h}: {info.reason}. Use summation='auto' or 'exact'.")

    def energy(self, model, x):
        return model.energy(x)

    @property
    def shares_energy_sums(self) -> bool:
        return True


@dataclass(frozen=True)
class _Usa(ExponentialKind):
    name: str = "usa"
    mean_field = "partition"

    def output(self, p: HeadSums, Wt, n, c):
        logscale = p.logz - c
        top = float(logscale.max())
        if top > LOG_OVERFLOW:
            raise LogOverflow(top)
        return np.exp(logscale)[..., None] * (p.mean @ Wt)

    def scale(self, n):
        return 1.0 / n

    def consensus_sum(self, a, c):
        with np.errstate(over="ignore"):  # (an infinite rate: no fixed step is stable)
            return np.exp(a - c)

    def dense(self, s):
        return np.exp(s)


@dataclass(frozen=True)
class _Softmax(ExponentialKind):
    name: str = "softmax"
    mean_field = "mean"

    def output(self, p, Wt, n, c):
        return p.mean @ Wt

    def scale(self, n):
        return 1.0

    def consensus_sum(self, a, c):
        return np.ones_like(a)  # (rows of attention weights sum to 1)

    def dense(self, s):
        return np.exp(s - logsumexp(s, axis=-1, keepdims=True))


_RELU_FAST = Refusal("summation='fast' needs exponential heads; a ReLU kind is not smooth and has no fast path "
                     "with a proven error. Use summation='exact' or 'auto' (the exact pass).")
_RELU_MEAN_FIELD = Refusal("the mean-field schemes know the exponential kinds (USA, softmax) only; a ReLU kind "
                           "runs as particles: particles.simulate on the tokens.")


@dataclass(frozen=True)
class _ReluFamily(Kind):
    """ReLU weights: the blocked ReLU row sums over the tokens themselves (no sources, weights or
    transpose), always exact."""

    fast = _RELU_FAST
    mean_field = _RELU_MEAN_FIELD
    exps_per_pair = 0

    def exact(self, model, x, sources, weights, transpose):
        if sources is not None or weights is not None or transpose:
            raise InvalidParameterError(f"kind={self.name!r} (ReLU) sums run over the tokens themselves only: "
                                        "omit sources, weights and transpose.")
        L = model._score_scale()
        return [relu_sums(x @ (L * model.M[h]), x, model.block_elements) for h in range(model.n_heads)]

    def ensemble(self, left, xs):
        return batched_relu_sums(left, xs)


@dataclass(frozen=True)
class _Relu(_ReluFamily):
    name: str = "relu"

    def output(self, p, Wt, n, c):
        return (p.mean @ Wt) / n

    def scale(self, n):
        return 1.0

    def dense(self, s):
        return np.maximum(s, 0.0) / s.shape[-1]


@dataclass(frozen=True)
class _ReluRownorm(_ReluFamily):
    name: str = "relu_rownorm"
    beta_free = True

    def output(self, p, Wt, n, c):
        # a row attending to nothing contributes zero
        tot = p.total
        safe = np.where(tot > 0, tot, 1.0)
        return np.where((tot > 0)[..., None], p.mean / safe[..., None], 0.0) @ Wt

    def scale(self, n):
        return 1.0

    def dense(self, s):
        r = np.maximum(s, 0.0)
        tot = r.sum(-1, keepdims=True)
        return np.divide(r, tot, out=np.zeros_like(r), where=tot > 0)


for _kind in (_Usa(), _Softmax(), _Relu(), _ReluRownorm()):
    register_kind(_kind)
