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
:func:`rd_threshold` finds the largest parameter p (β, a head-strength ratio, ...) such that
the candidate holds at every saved time of the run from a given start. Conditions are checked
at the saved times only: save densely enough to resolve the first failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import theory as th
from .._core.declarations import Relation, declare
from .._core.params import NONE, AnyOf, Function, Instance, Integer, Interval, Options, SequenceOf
from .._core.params_data import Array, Points, States
from .._core.states import check_states, check_times
from .._core.validation import InvalidParameterError, check_choice, check_param
from .._dynamics.saving import SaveAt, Trajectory
from .._dynamics.solve import simulate
from .._dynamics.steppers import STEPPERS
from .._model.checks import Model, check_model, fits_model
from .._model.display import fields_html
from .._model.fields import STATE
from .._model.multihead import MultiHead
from .shadows import radial_parts

__all__ = ["RD_CANDIDATES", "rd_margins", "radial_dominance", "RDReport", "rd_threshold", "RDThreshold",
           "rd_threshold_equiangular"]

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


@declare(model=Model(geometries=("sphere",)), traj=AnyOf(Instance(Trajectory), States(on_sphere=False)), ts=AnyOf(NONE, Array(1)))
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


@dataclass(frozen=True)
class RDThreshold:
    """Result of :func:`rd_threshold`.

    Attributes
    ----------
    value : float
        Largest p found with the candidate holding at every saved time (NaN if it fails at
        the lower end of the bracket; the upper end if it never fails).
    lower, upper : float
        Final bracket: holds at ``lower``, fails at ``upper`` (``upper = inf`` if no failure).
    n_runs : int
        Simulations made.
    status : {"bracketed", "holds_on_bracket", "fails_at_lower"}
    """

    value: float
    lower: float
    upper: float
    n_runs: int
    status: str


@declare(make_model=Function("a callable p -> MultiHead"), x0=Points(), t1=Interval(0, None), bracket=SequenceOf(
    Interval(), min_len=2, increasing=True), candidate=Options(*RD_CANDIDATES), n_grid=Integer(2),
    xtol=Interval(0, None, closed="neither"), n_saves=Integer(2), dt=AnyOf(NONE, Interval(0, None, closed="neither")),
    method=Options(*STEPPERS), relations=[Relation(("bracket",), lambda b: len(b) == 2, "must be a pair (lower, upper)",
                        breaks={"bracket": [0.0, 1.0, 2.0]})])
def rd_threshold(make_model, x0, *, t1: float, bracket, candidate: str = "pointwise", n_grid: int = 9,
                 xtol: float = 1e-6, n_saves: int = 41, dt: float | None = None, method: str = "rk4") -> RDThreshold:
    r"""Largest p in ``bracket`` such that ``candidate`` holds along the whole run from ``x0``.

    For each trial p the model ``make_model(p)`` is simulated from ``x0`` up to ``t1`` and the
    candidate is checked at ``n_saves`` equally spaced times (``t1 = 0``: at ``x0`` only).
    A grid of ``n_grid`` values locates the first failure; bisection then narrows the bracket
    to ``xtol``. The set of admissible p need not be an interval: the value returned is the
    end of the first admissible stretch of the grid.

    Since holding on [0, t1] implies holding on [0, s] for s < t1, the threshold is
    non-increasing in t1; at t1 = 0 with orthogonal tokens and H equal scalar heads it is the
    closed-form :math:`\beta^*` (Theorem 19).

    Parameters
    ----------
    make_model : callable p -> MultiHead
        E.g. ``lambda b: MultiHead.scalar([1, 1], d, beta=b)`` (search over β) or
        ``lambda r: MultiHead.scalar([1, r], d, beta=2.0)`` (head-strength ratio).
    x0 : ndarray of shape (n, d), unit rows
    t1 : float >= 0
    bracket : (float, float)
        Search interval, lower < upper.
    candidate : {"exact", "orthogonal", "pointwise"}
    n_grid : int >= 2
    xtol : float > 0
    n_saves : int >= 2
    dt : float, optional
        Step (default t1 / 200); ``method`` as in :func:`particles.simulate`.

    Returns
    -------
    RDThreshold

    Examples
    --------
    >>> from particles import theory
    >>> x0 = theory.orthogonal_tokens(12)
    >>> res = rd_threshold(lambda b: MultiHead.scalar([1.0, 1.0], d=12, beta=b, kind="softmax"),
    ...                    x0, t1=0.0, bracket=(0.0, 3.0), xtol=1e-8)
    >>> bool(abs(res.value - theory.beta_star(2, 12, 1.0)) < 1e-7)
    True
    """
    caller = "rd_threshold"
    if isinstance(make_model, MultiHead) or not callable(make_model):
        raise InvalidParameterError(
            f"The 'make_model' parameter of {caller} must be a callable p -> MultiHead; got {type(make_model).__name__}."
        )
    check_choice(candidate, "candidate", RD_CANDIDATES, caller)
    t1 = check_param(t1, "t1", caller, low=0.0)
    try:
        lo, hi = (float(b) for b in bracket)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"bracket of {caller} must be a pair (lower, upper); got {bracket!r}.") from exc
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise InvalidParameterError(f"bracket of {caller} must be finite with lower < upper; got {bracket!r}.")
    n_grid = check_param(n_grid, "n_grid", caller, low=2, integer=True)
    xtol = check_param(xtol, "xtol", caller, low=0.0, low_open=True)
    n_saves = check_param(n_saves, "n_saves", caller, low=2, integer=True)
    ts = np.linspace(0.0, t1, n_saves)
    runs = [0]

    def holds(p) -> bool:
        model = make_model(p)
        check_model(model, caller, geometries=("sphere",))
        x = model.check_x(x0, "x0")
        runs[0] += 1
        if t1 == 0.0:
            xs = x[None]
        else:
            step = t1 / 200 if dt is None else dt
            xs = simulate(x, model, t1=t1, dt=step, method=method, save=SaveAt(ts=ts)).x
        return _report(model, xs, ts[: len(xs)]).holds_throughout[candidate]

    grid = np.linspace(lo, hi, n_grid)
    if not holds(grid[0]):
        return RDThreshold(np.nan, np.nan, float(grid[0]), runs[0], "fails_at_lower")
    good, bad = grid[0], None
    for p in grid[1:]:
        if holds(p):
            good = p
        else:
            bad = p
            break
    if bad is None:
        return RDThreshold(float(good), float(good), np.inf, runs[0], "holds_on_bracket")
    while bad - good > xtol:
        mid = 0.5 * (good + bad)
        if holds(mid):
            good = mid
        else:
            bad = mid
    return RDThreshold(float(good), float(good), float(bad), runs[0], "bracketed")


@declare(t1=Interval(0, None), n=Integer(2), H=Integer(2), alpha=Interval(0, None, closed="neither"), n_saves=Integer(2),
         xtol=Interval(0, None, closed="neither"))
def rd_threshold_equiangular(t1: float, n: int, H: int = 2, alpha: float = 1.0, *, n_saves: int = 41,
                             xtol: float = 1e-9) -> float:
    r"""Prediction of :func:`rd_threshold` (candidate ``"pointwise"``, β search) without particles.

    H equal softmax scalar heads α from orthogonal tokens: the run stays equiangular with
    ρ(t) from :func:`particles.theory.solve_equiangular`, and Condition 8 at every token
    reads :math:`\cos\angle(f_i, x_i) \le c^*(H)` with the cosine of
    :func:`particles.theory.cos_angle_equiangular`. Returns the largest β ≤ β* for which this
    holds at the ``n_saves`` equally spaced times of [0, t1] (bisection to ``xtol``), β* itself
    at t1 = 0, NaN if it fails already at β = 0.

    Examples
    --------
    >>> from particles import theory
    >>> bool(rd_threshold_equiangular(0.0, 12) == theory.beta_star(2, 12, 1.0))
    True
    """
    caller = "rd_threshold_equiangular"
    t1 = check_param(t1, "t1", caller, low=0.0)
    n = check_param(n, "n", caller, low=2, integer=True)
    H = check_param(H, "H", caller, low=2, integer=True)
    alpha = check_param(alpha, "alpha", caller, low=0.0, low_open=True)
    n_saves = check_param(n_saves, "n_saves", caller, low=2, integer=True)
    xtol = check_param(xtol, "xtol", caller, low=0.0, low_open=True)
    cs = th.c_star(H)
    hi = th.beta_star(H, n, alpha)
    ts = np.linspace(0.0, t1, n_saves)

    def ok(b):
        rho = np.zeros(1) if t1 == 0 else th.solve_equiangular(0.0, ts, [alpha] * H, b, n, "softmax")
        return bool(np.all(th.cos_angle_equiangular(rho, b, n, alpha) <= cs + 1e-12))

    if hi < 0 or not ok(0.0):
        return np.nan
    lo = 0.0
    if ok(hi):
        return float(hi)
    while hi - lo > xtol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return float(lo)
