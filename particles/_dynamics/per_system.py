"""Steppers that give every system of a stack (S, n, d) of independent systems a step of its own.

A batch of systems that shares one adaptive step moves at the pace of the system in the fastest
transient (or the stiffest cluster). These steppers cover the solve loop's outer step (which
lands on the save times; their outer ``err`` is 0) by inner steps chosen per system from each
system's own error estimate, each inner stage evaluating only the systems that still need it,
through the field's optional ``systems(idx)`` (:meth:`particles.Ensemble.systems`). A field
without it is one system.
"""

from __future__ import annotations

import weakref

import numpy as np

from .._core.errors import SolverError
from .tableaux import dp_stages, onto, scaled_rms

__all__ = ["dopri5_systems"]


class _WholeState:
    """A field without systems(idx) as a stack of one system (for :func:`dopri5_systems`)."""

    def __init__(self, field):
        self.field = field

    def systems(self, idx):
        return lambda ts, xs: self.field(float(ts[0]), xs[0])[None]


#: per-field inner steps of dopri5_systems, carried from one outer step to the next
_INNER_STEPS = weakref.WeakKeyDictionary()


def _inner_steps(field, h=None):
    """The inner steps last used with ``field`` (None if none), or store ``h``; fields that cannot
    be weakly referenced start from the outer step every time."""
    try:
        if h is None:
            return _INNER_STEPS.get(field)
        _INNER_STEPS[field] = h
    except TypeError:
        return None


def dopri5_systems(field, t, x, dt, geom, rng=None, sigma=0.0, *, rtol=1e-8, atol=1e-10, **_):
    r"""Dormand–Prince 5(4) with a step size of its own for every system of a stack (S, n, d).

    A batch of independent systems sharing one adaptive step moves at the pace of the system in
    the fastest transient; here the outer step (a save interval: the loop lands on its targets) is
    covered by inner steps chosen per system, from each system's own embedded error (RMS over its
    entries, scaled by ``atol + rtol·|x|``; accepted when <= 1; step factor
    :math:`\mathrm{clip}(0.9\,err^{-1/5}, 0.2, 5)`), each inner stage evaluating only the systems
    still inside the outer step (the field's ``systems(idx)``: :class:`particles.Ensemble` and
    its settling field; ``systems(idx)`` returns ``v(ts, xs)``, the velocity of those systems at
    their own times ts). The outer ``err`` is 0: the outer controller only lands on targets. A
    field without ``systems`` is one system (then this is dopri5 with an I-controller inside the
    outer step).
    """
    key, systems = field, getattr(field, "systems", None)
    single = not callable(systems)
    if single:  # one system: the whole state (then this is dopri5 with an I-controller)
        x, systems = x[None], _WholeState(field).systems
    S = x.shape[0]
    x, tau = x.copy(), np.zeros(S)
    h = _inner_steps(key)
    h = np.full(S, float(dt)) if h is None or h.shape != (S,) else h.copy()
    active = np.arange(S)
    f, k1 = systems(active), None
    while active.size:
        xa, ta = x[active], t + tau[active]
        if k1 is None:
            k1 = f(ta, xa)
        remaining = dt - tau[active]
        # the last step takes the rest of the interval, a round-off sliver (< 1e-9 of it) included
        clipped = h[active] >= remaining * (1 - 1e-9)
        hs = np.where(clipped, remaining, h[active])
        with np.errstate(over="ignore", invalid="ignore"):
            try:
                y5, diff, k = dp_stages(f, xa, hs[:, None, None], k1, lambda c, ta=ta, hs=hs: ta + c * hs)
                err = scaled_rms(diff, xa, y5, rtol, atol, axis=(1, 2))
            except SolverError:  # a stage the field refuses: every system of this trial retries shorter
                y5, err, k = xa, np.full(active.size, np.inf), None
        ok = err <= 1.0
        fac = np.where(np.isfinite(err), np.clip(0.9 * np.maximum(err, 1e-10) ** -0.2, 0.2, 5.0), 0.2)
        _check_underflow((hs * fac)[~ok], t)
        h[active] = np.where(ok & clipped, np.maximum(h[active], hs * fac), hs * fac)
        acc = active[ok]
        x[acc] = onto(geom, y5[ok])
        tau[acc] = np.where(clipped[ok], dt, tau[acc] + hs[ok])
        still = tau[active] < dt
        k1 = (k1 if k is None else np.where(ok[:, None, None], k[6], k1))[still]
        if not np.all(still):
            active = active[still]
            f = systems(active) if active.size else f
    _inner_steps(key, h)
    return (x[0] if single else x), 0.0


def _check_underflow(h, t):
    if np.any(h < 1e-14 * max(1.0, abs(t))):
        raise SolverError(f"step size underflow at t={t:.6g} in a system of the stack: the flow is too stiff "
                          "or not finite here. Lower beta, or loosen rtol.")
