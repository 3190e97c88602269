r"""The summation passes of a :class:`~particles.MultiHead`'s heads: the sums every quantity of
a model is computed from (velocity, energies, entropies, diagnostics).

Each kind runs its own pass (``Kind.exact``): the exponential kinds the summation layer's
:math:`\log Z_i` and softmax mean (:mod:`particles.summation`, exact or fast), the ReLU kinds the
blocked ReLU row sums; the energies are exp sums for every kind.
"""

from __future__ import annotations

import numpy as np

from .._core.arrays import check_source_weights
from .._core.declarations import declare
from .._core.params import NONE, AnyOf, Boolean
from .._core.params_data import Array
from .._core.threads import blas_single
from .._summation.exact import HeadSums
from .._summation.plan import exp_sums
from .._summation.record import note
from .fields import STATE

__all__ = ["PassesMixin"]

# below this n the tile bookkeeping of the symmetric pass costs more than the exps it saves
_SYMMETRIC_MIN_N = 512


class PassesMixin:
    """The passes of :class:`~particles.MultiHead` (they need ``check_x``, ``M``, ``beta``, ``kind``,
    ``summation``, ``tol``, ``geom``, ``block_elements`` and ``symmetric`` of the model)."""

    @declare(x=STATE, sources=AnyOf(NONE, STATE), weights=AnyOf(NONE, Array(1)), transpose=Boolean(), check=Boolean())
    def sums(self, x, *, sources=None, weights=None, transpose: bool = False, check: bool = True) -> list[HeadSums]:
        r"""The sums of every head at the targets ``x`` over ``sources`` (default: x) with
        non-negative ``weights`` w_j (default: all 1).

        The kind's own pass (``Kind.exact``). Exp kinds: :math:`\log Z_i` and the softmax mean
        :math:`S_i/Z_i` of :math:`Z_i = \sum_j w_j e^{\beta\langle x_i, M_h y_j\rangle}` (``transpose``:
        of :math:`M_h^\top`), through the summation layer; ReLU kinds: the ReLU row sums.
        ``check=False`` skips validation (for states the caller validated, e.g. Runge–Kutta stages).

        >>> from particles import MultiHead
        >>> model = MultiHead(np.eye(3), beta=0.0, kind="softmax")
        >>> float(model.sums(np.eye(3))[0].logz[0]) == float(np.log(3))
        True
        """
        if check:
            x = self.check_x(x)
            sources = None if sources is None else self.check_x(sources, "sources")
            n_sources = len(x if sources is None else sources)
            weights = None if weights is None else check_source_weights(weights, n_sources, "MultiHead.sums")
        res = self.attention.exact(self, x, sources, weights, transpose)
        note(res)  # (a run's summation record: the route and bound of each head)
        return res

    def energy_sums(self, x, *, transpose: bool = False, check: bool = True) -> list[HeadSums]:
        r"""The exponential sums that define the energies, for every kind: per head
        :math:`\log Z_i` and :math:`S_i/Z_i` of :math:`Z_i = \sum_j e^{\beta\langle x_i, M_h x_j\rangle}`
        (``transpose``: of :math:`M_h^\top`), so that :math:`E_h = \frac{1}{2\beta n^2}\sum_i Z_i`.
        Equal to :meth:`sums` for the exp kinds; ReLU kinds attend through other weights but keep
        these energies.

        >>> from particles import MultiHead
        >>> model = MultiHead(np.eye(3), beta=1.0, kind="relu")
        >>> bool(np.isclose(np.exp(model.energy_sums(np.eye(3))[0].logz[0]), np.e + 2))  # orthogonal tokens
        True
        """
        x = self.check_x(x) if check else x
        return self._exp_sums(x, transpose=transpose)

    def _exp_sums(self, x: np.ndarray, *, sources: np.ndarray | None = None, weights: np.ndarray | None = None,
                  transpose: bool = False) -> list[HeadSums]:
        # s_ij = <x_i, M y_j> = (x_i^T M) y_j: the logit matrix of head h is β M_h (β M_hᵀ transposed)
        same = sources is None
        y = x if same else sources
        BM = self.beta * (self.M.transpose(0, 2, 1) if transpose else self.M)
        with self._blas_single(x.shape[0] * y.shape[0], exp=True):
            return exp_sums(BM, x, y, weights, summation=self.summation, tol=self.tol,
                            on_sphere=self.geom.on_sphere, block_elements=self.block_elements, same_points=same,
                            symmetric=self.symmetric and x.shape[0] >= _SYMMETRIC_MIN_N)

    def _blas_single(self, pairs: int, exp: bool = False):
        """One BLAS thread around an exp pass (``exp``, or this model's attention pass if of an exp
        kind) that runs threads of its own (:func:`blas_single`); a ReLU pass's parallelism is the BLAS
        threads themselves."""
        exp = exp or self.attention.shares_energy_sums
        return blas_single(pairs if exp else 0, own=exp and self.summation == "fast")

    def _score_scale(self) -> float:
        """The factor of the scores in a ReLU pass: β, or 1 for a kind whose weights do not depend on
        β > 0 (``Kind.beta_free``: ReLU(βs) = β ReLU(s) cancels in a row normalisation)."""
        return 1.0 if (self.attention.beta_free and self.beta > 0) else self.beta
