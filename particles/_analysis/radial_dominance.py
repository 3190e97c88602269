r"""Radial dominance along trajectories, and the largest parameter keeping it for a whole run.

Head outputs :math:`f^h_i` (:meth:`MultiHead.head_outputs`), radial shadows
:math:`a^h_i = \langle f^h_i, x_i\rangle`, tangential parts :math:`P f^h_i`, on the sphere.
Three candidate radial-dominance conditions, from weakest to strongest (token i, head h):

- ``"exact"``: :math:`\langle P f^h_i, P\sum_k f^k_i\rangle \ge 0`, i.e. head h's tangential
  force does not oppose the motion. For USA heads under C3 + C4 this is the token's term
  of :math:`n^3\,dE_h/dt = \sum_i[\|Pf^h_i\|^2 + \sum_{k\ne h}(\langle f^h_i,f^k_i\rangle - a^h_ia^k_i)]`.
- ``"orthogonal"``: :math:`\|Pf^h_i\|^2 - |a^h_i|\sum_{k\ne h}|a^k_i| \ge 0`; for orthogonal heads
  (:math:`\langle f^h, f^k\rangle = 0`) it implies ``"exact"``.
- ``"pointwise"``: Condition 8, :math:`\|Pf^h_i\|^2 - \|f^h_i\|\sum_{k\ne h}|a^k_i| \ge 0`
  (the margin :math:`m^h_i` of :func:`particles.diagnose`); implies ``"orthogonal"`` since
  :math:`|a^h_i| \le \|f^h_i\|`. For orthogonal tokens and H equal scalar heads it holds iff
  :math:`\beta \le \beta^*` (Theorem 19, :func:`particles.theory.beta_star`).

Each margin counts as holding when it is :math:`\ge -10^{-12}\max_{h,i}\|f^h_i\|^2` (round-off).
:func:`radial_dominance` reports, for saved states, where and when each candidate holds;
:func:`~particles._analysis.rd_threshold.rd_threshold` finds the largest parameter p (β, a
head-strength ratio, ...) such that the candidate holds at every saved time of the run from a
given start. Conditions are checked at the saved times only: save densely enough to resolve the
first failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._core.declarations import declare
from .._core.params import NONE, AnyOf, Instance
from .._core.params_data import Array, States
from .._core.states import check_states, check_times
from .._core.validation import InvalidParameterError, check_choice
from .._dynamics.saving import Trajectory
from .._model.checks import Model, check_model, fits_model
from .._model.display import fields_html
from .._model.fields import STATE
from .._model.multihead import MultiHead
from .shadows import radial_parts

__all__ = ["RD_CANDIDATES", "rd_margins", "radial_dominance", "RDReport"]

#: candidate conditions and their margins (module docstring)
RD_CANDIDATES = {
    "exact": "<P f_i^h, P sum_k f_i^k>",
    "orthogonal": "|P f_i^h|^2 - |a_i^h| sum_{k != h} |a_i^k|",
    "pointwise": "|P f_i^h|^2 - |f_i^h| sum_{k != h} |a_i^k|  (Condition 8)",
}

_RTOL = 1e-12


@declare(model=Model(geometries=("sphere",)), x=STATE, relations=[fits_model()])
def rd_margins(model: MultiHead, x) -> dict:
    r"""Margins of every candidate at state ``x``: dict name -> array (H, n).

    Examples
    --------
    >>> model = MultiHead.scalar([1.0, 1.0], d=4, beta=0.5, kind="softmax")
    >>> m = rd_margins(model, np.eye(4))
    >>> bool(np.all(m["pointwise"] <= m["orthogonal"]))
    True
    """
    check_model(model, "rd_margins", geometries=("sphere",))
    return _margins(model, model.check_x(x))[0]


def _margins(model: MultiHead, x: np.ndarray):
    f = model.head_outputs(x)
    r = radial_parts(f, x)
    a = r.shadow
    exact = np.einsum("hid,id->hi", f, f.sum(axis=0)) - a * a.sum(axis=0)[None]  # <P f^h, P Σ f^k>
    out = {"exact": exact, "orthogonal": r.tangential2 - np.abs(a) * r.others, "pointwise": r.margin}
    return out, float(r.norm2.max()) if r.norm2.size else 0.0


@dataclass(frozen=True)
class RDReport:
    """Where and when each radial-dominance candidate holds along saved states.

    Attributes
    ----------
    t : ndarray (n_times,)
    margins : dict name -> ndarray (n_times, H, n)
    holds : dict name -> bool ndarray (n_times, H, n)
    first_failure : dict name -> float
        First saved time at which some token and head fails (``inf`` if never).
    holds_throughout : dict name -> bool
    """

    t: np.ndarray
    margins: dict
    holds: dict
    first_failure: dict = field(default_factory=dict)
    holds_throughout: dict = field(default_factory=dict)

    def failures(self, candidate: str = "pointwise") -> np.ndarray:
        """(time index, head, token) triples where ``candidate`` fails, shape (k, 3)."""
        check_choice(candidate, "candidate", RD_CANDIDATES, "RDReport.failures")
        return np.argwhere(~self.holds[candidate])

    def fraction(self, candidate: str = "pointwise") -> np.ndarray:
        """Fraction of (head, token) pairs where ``candidate`` holds, per saved time, shape (n_times,)."""
        check_choice(candidate, "candidate", RD_CANDIDATES, "RDReport.fraction")
        return self.holds[candidate].mean(axis=(1, 2))

    def _rows(self) -> list:
        """(candidate, holds throughout, first failure, least fraction holding) per candidate."""
        return [(c, str(bool(self.holds_throughout.get(c, False))), f"{self.first_failure.get(c, np.inf):.4g}",
                 f"{float(self.fraction(c).min()):.3g}" if self.holds[c].size else "nan")
                for c in RD_CANDIDATES if c in self.holds]

    def _shape(self) -> str:
        n_times, n_heads, n = next(iter(self.holds.values())).shape if self.holds else (len(self.t), 0, 0)
        span = f", t in [{self.t[0]:.4g}, {self.t[-1]:.4g}]" if len(self.t) else ""
        return f"{n_times} saves{span}, {n_heads} heads, {n} tokens"

    def __repr__(self) -> str:
        parts = [f"{c}: " + ("holds throughout" if ok == "True" else f"fails first at t = {first}")
                 for c, ok, first, _ in self._rows()]
        return f"RDReport({self._shape()}; " + "; ".join(parts) + ")"

    def _repr_html_(self) -> str:
        return fields_html(f"RDReport: {self._shape()} (arrays: .margins, .holds)", self._rows(),
                           header=("candidate", "holds throughout", "first failure (t)", "least fraction holding"))


@declare(model=Model(geometries=("sphere",)), traj=AnyOf(Instance(Trajectory), States(on_sphere=False)),
         ts=AnyOf(NONE, Array(1)))
def radial_dominance(model: MultiHead, traj, ts=None) -> RDReport:
    r"""Evaluate every candidate of :data:`RD_CANDIDATES` on saved states.

    Parameters
    ----------
    model : MultiHead (sphere geometry)
    traj : Trajectory or ndarray of shape (n_times, n, d)
        A run saved with positions (``SaveAt(x=True)``), or the states themselves.
    ts : array_like (n_times,), optional
        Times of the states when ``traj`` is an array (default 0, 1, 2, ...).

    Returns
    -------
    RDReport

    Examples
    --------
    >>> model = MultiHead.scalar([1.0, 1.0], d=4, beta=0.2, kind="softmax")  # beta* = 0.31
    >>> rep = radial_dominance(model, np.eye(4)[None])
    >>> rep.holds_throughout["pointwise"]
    True
    """
    caller = "radial_dominance"
    check_model(model, caller, geometries=("sphere",))
    if isinstance(traj, Trajectory):
        if ts is not None:
            raise InvalidParameterError(
                f"ts of {caller} is only for an array of states: a Trajectory carries its own times "
                "(traj.t). Drop ts, or pass traj.x with ts."
            )
        xs = check_states(traj.x, "traj.x", caller, d=model.d)
        t = np.asarray(traj.t, dtype=np.float64)
    else:
        xs = check_states(traj, "traj", caller, d=model.d)
        t = np.arange(len(xs), dtype=np.float64) if ts is None else check_times(ts, len(xs), "ts", caller)
    return _report(model, xs, t)


def _report(model, xs, t) -> RDReport:
    per_time = [_margins(model, x) for x in xs]
    margins, holds, first, throughout = {}, {}, {}, {}
    for name in RD_CANDIDATES:
        m = np.stack([pt[0][name] for pt in per_time])
        scale = np.array([pt[1] for pt in per_time])[:, None, None]
        ok = m >= -_RTOL * scale
        margins[name], holds[name] = m, ok
        bad = np.flatnonzero(~ok.all(axis=(1, 2)))
        first[name] = float(t[bad[0]]) if bad.size else np.inf
        throughout[name] = bool(bad.size == 0)
    return RDReport(t, margins, holds, first, throughout)
