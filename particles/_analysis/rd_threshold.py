r"""The largest parameter p (β, a head-strength ratio, ...) keeping a radial-dominance candidate
(:mod:`~particles._analysis.radial_dominance`) at every saved time of a run: a bracketing search
on simulated runs (:func:`rd_threshold`), and its closed-form reference on equiangular tokens
(:func:`rd_threshold_equiangular`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import theory as th
from .._core.declarations import Relation, declare
from .._core.keywords import keyword_only
from .._core.params import NONE, AnyOf, Function, Integer, Interval, Options, SequenceOf
from .._core.params_data import Points
from .._core.validation import InvalidParameterError, check_choice, check_param
from .._dynamics.saving import SaveAt
from .._dynamics.solve import simulate
from .._dynamics.steppers import STEPPERS
from .._model.checks import check_model
from .._model.multihead import MultiHead
from .radial_dominance import RD_CANDIDATES, _report

__all__ = ["RDThreshold", "rd_threshold", "rd_threshold_equiangular"]


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
        E.g. ``lambda b: MultiHead.scalar([1, 1], d=d, beta=b)`` (search over β) or
        ``lambda r: MultiHead.scalar([1, r], d=d, beta=2.0)`` (head-strength ratio).
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
    >>> bool(abs(res.value - theory.beta_star(2, n=12, alpha=1.0)) < 1e-7)
    True
    """
    caller = "rd_threshold"
    if isinstance(make_model, MultiHead) or not callable(make_model):
        raise InvalidParameterError(
            f"The 'make_model' parameter of {caller} must be a callable p -> MultiHead; "
            f"got {type(make_model).__name__}."
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
            xs = simulate(x, model, t1=t1, dt=step, method=method, save=SaveAt(ts=ts), progress=False).x
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


@keyword_only("n", "H", "alpha")
@declare(t1=Interval(0, None), n=Integer(2), H=Integer(2), alpha=Interval(0, None, closed="neither"),
         n_saves=Integer(2), xtol=Interval(0, None, closed="neither"))
def rd_threshold_equiangular(t1: float, *, n: int, H: int = 2, alpha: float = 1.0, n_saves: int = 41,
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
    >>> bool(rd_threshold_equiangular(0.0, n=12) == theory.beta_star(2, n=12, alpha=1.0))
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
    hi = th.beta_star(H, n=n, alpha=alpha)
    ts = np.linspace(0.0, t1, n_saves)

    def ok(b):
        rho = np.zeros(1) if t1 == 0 else th.solve_equiangular(0.0, ts, lambdas=[alpha] * H, beta=b, n=n,
                                                                 kind="softmax")
        return bool(np.all(th.cos_angle_equiangular(rho, beta=b, n=n, alpha=alpha) <= cs + 1e-12))

    if hi < 0 or not ok(0.0):
        return np.nan
    lo = 0.0
    if ok(hi):
        return float(hi)
    while hi - lo > xtol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return float(lo)
