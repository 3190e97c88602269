r"""Systems of an :class:`~particles.Ensemble` that can no longer change: the invariant-cap
certificate (:meth:`SettledMixin.settled`, its proof in the docstring) and the field whose
certified systems stop (:meth:`SettledMixin.settling`, :mod:`~particles._model.settling`)."""

from __future__ import annotations

import numpy as np

from .._core.declarations import declare
from .._core.errors import InvalidParameterError
from .._core.numerics import FEW_COORDS, scalar_of
from .._core.numerics import rowdot as _rowdot
from .._core.params import Integer, Interval
from .._core.params_data import States
from .._core.validation import check_param
from .settling import SettlingEnsemble

__all__ = ["SettledMixin"]

_STATES = States(on_sphere=False)
_DIAMETER = Interval(0, np.pi, closed="right")


class SettledMixin:
    """The settling methods of :class:`~particles.Ensemble` (they need ``geom``, ``geometry``, ``W``
    and ``check_x`` of the ensemble)."""

    @declare(x=_STATES, diameter=_DIAMETER)
    def settled(self, x, diameter: float) -> np.ndarray:
        r"""Systems whose tokens stay within geodesic distance ``diameter`` of each other forever.

        A system is certified when its tokens lie in the cap :math:`C = \{y : \langle y, c\rangle
        \ge \cos r\}` around their normalised mean c with 2r < ``diameter`` (so r < π/2).

        Proof that C is forward invariant. Let every value matrix be :math:`W_h = \mu_h I` with
        :math:`\mu_h \ge 0` (checked) and every attention weight :math:`a^h_{ij} \ge 0` (true of
        every kind, any M: exponentials, ReLUs and their normalisations). Then
        :math:`\dot x_i = \sum_h \mu_h A^h_i P_{x_i}\bar x^h_i` with :math:`A^h_i = \sum_j a^h_{ij}
        \ge 0` and :math:`\bar x^h_i = \sum_j a^h_{ij}x_j / A^h_i` a convex combination of tokens.
        Let :math:`m(t) = \min_i \langle x_i, c\rangle` and i a minimiser with :math:`m \ge 0`:
        :math:`\langle \bar x^h_i, c\rangle \ge m` (a convex combination of values >= m) and
        :math:`\langle x_i, \bar x^h_i\rangle \le 1` (:math:`\|x_i\| = 1 \ge \|\bar x^h_i\|`), so

        .. math:: \tfrac{d}{dt}\langle x_i, c\rangle = \sum_h \mu_h A^h_i\big(\langle\bar x^h_i, c\rangle
                  - \langle x_i,\bar x^h_i\rangle\langle x_i, c\rangle\big)
                  \ge \sum_h \mu_h A^h_i\,(m - m) = 0,

        and the minimum of finitely many C¹ functions whose active members never decrease does
        not decrease: m(t) >= cos r for all later t, every token stays in C, and every pairwise
        angle stays <= 2r < ``diameter``. Hence the system is one ε-cluster for every ε >=
        ``diameter`` (and all its pairs have :math:`\langle x_i,x_j\rangle \ge \cos` ``diameter``)
        at every later time: a statistic of these at a final time T is fixed, and the system can
        stop (:meth:`settling`). The statement is about the exact
        flow; the certificate keeps a relative margin of 1e-6 on r for the round-off of the test.

        Parameters
        ----------
        x : array_like of shape (S, n, d)
            Tokens on the sphere.
        diameter : float in (0, π]
            Geodesic diameter to certify.

        Returns
        -------
        ndarray of bool, shape (S,)

        Raises
        ------
        ValueError
            If the ensemble is not on the sphere, or a value matrix is not μI with μ >= 0.
        """
        self._check_settling("Ensemble.settled")
        diameter = check_param(diameter, "diameter", "Ensemble.settled", low=0.0, high=np.pi, low_open=True)
        return self._settled(self.check_x(x), diameter)

    @declare(diameter=_DIAMETER, check_every=Integer(1), merge=Interval(0, None))
    def settling(self, diameter: float, check_every: int = 1, merge: float = 0.0):
        """This ensemble as a field whose systems stop moving once :meth:`settled` certifies them
        (diameter ``diameter``; tested at t0 and every ``check_every`` accepted steps): a
        :class:`~particles._model.settling.SettlingEnsemble` for :func:`particles.simulate`.
        ``merge = δ > 0`` (scalar heads, m_h >= 0): at every accepted step the tokens of a running
        system closer than δ (chordal) join for good and move as one token of their group's mass
        (:mod:`~particles._model.merging`)."""
        return SettlingEnsemble(self, diameter, check_every, merge)

    def _check_settling(self, caller: str = "Ensemble.settled") -> None:
        """Raise ValueError unless the hypotheses of :meth:`settled` hold (sphere, W_h = μ_h I, μ_h >= 0)."""
        if not self.geom.on_sphere:
            raise InvalidParameterError(f"{caller} certifies caps on the sphere; the ensemble has "
                                        f"geometry={self.geometry!r}.")
        mus = [scalar_of(w) for w in self.W]
        if any(mu is None or mu < 0 for mu in mus):
            raise InvalidParameterError(f"{caller} needs every value matrix W_h = mu_h I with mu_h >= 0 (the cap "
                                        "is not invariant otherwise); the ensemble's W is not.")

    def _settled(self, x: np.ndarray, diameter: float) -> np.ndarray:
        return _in_cap(x, 0.5 * diameter * (1 - 1e-6))


def _in_cap(x: np.ndarray, radius: float) -> np.ndarray:
    """Systems whose tokens all lie within angle ``radius`` of their normalised mean."""
    if x.shape[2] <= FEW_COORDS:  # one strided loop per coordinate (see particles._core.numerics)
        c = [x[..., k].sum(axis=1) for k in range(x.shape[2])]
        norm = np.maximum(np.sqrt(sum(ck * ck for ck in c)), 1e-300)
        cos = x[..., 0] * (c[0] / norm)[:, None]
        for k in range(1, x.shape[2]):
            cos += x[..., k] * (c[k] / norm)[:, None]
    else:
        c = x.sum(axis=1)
        c /= np.maximum(np.sqrt(_rowdot(c, c)), 1e-300)[:, None]
        cos = np.einsum("snd,sd->sn", x, c)
    return cos.min(axis=1) >= np.cos(radius)
