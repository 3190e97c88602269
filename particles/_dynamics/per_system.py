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
from .controllers import PIDController, check_underflow
from .tableaux import DORMAND_PRINCE, DP_DENSE, dp_stages, onto, scaled_rms

__all__ = ["dopri5_systems"]


class _WholeState:
    """A field without systems(idx) as a stack of one system (for :func:`dopri5_systems`)."""

    def __init__(self, field):
        self.field = field

    def systems(self, idx):
        return lambda ts, xs: self.field(float(ts[0]), xs[0])[None]


#: every system's step control: the I-controller of the embedded error (no history: the systems are independent)
_CONTROL = PIDController(DORMAND_PRINCE.error_order)

#: per-field state of dopri5_systems carried from one outer step to the next (:class:`_Carry`)
_CARRY = weakref.WeakKeyDictionary()



class _Carry:
    """Where each system of a stack is: its last accepted point (t, x, possibly past the last
    target), its next step h, and the step that crossed the last target (start, length, start
    state, stages), for the interpolant; with the target and state handed out last."""

    def __init__(self, t, x, h):
        S = x.shape[0]
        self.t, self.x, self.h = np.full(S, float(t)), x.copy(), h
        self.seg_t, self.seg_h, self.seg_x = np.zeros(S), np.ones(S), x.copy()
        self.seg_k = np.zeros((7,) + x.shape)
        self.target, self.out = None, None

    @classmethod
    def of(cls, key, t, x, dt):
        """The carry of ``key`` if x at t is the state it handed out last, else a fresh one (a new
        run, or a state the loop changed) that keeps the step sizes of the last one."""
        try:
            c = _CARRY.get(key)
        except TypeError:  # a field that cannot be weakly referenced: no carry
            return cls(t, x, np.full(x.shape[0], float(dt)))
        same_time = c is not None and c.target is not None and abs(c.target - t) <= 1e-12 * max(1.0, abs(t))
        if same_time and c.out.shape == x.shape and np.array_equal(c.out, x):
            return c
        h = c.h.copy() if c is not None and c.h.shape == (x.shape[0],) else np.full(x.shape[0], float(dt))
        c = cls(t, x, h)
        try:
            _CARRY[key] = c
        except TypeError:
            pass
        return c

    def interpolate(self, target, geom):
        """Every system's state at ``target``, from the step of its that covers it."""
        theta = np.clip((target - self.seg_t) / self.seg_h, 0.0, 1.0)
        b = DP_DENSE @ np.stack([theta, theta**2, theta**3, theta**4])  # (7, S)
        hb = b * self.seg_h
        y = self.seg_x.copy()
        for i in (0, 2, 3, 4, 5, 6):  # the second stage has no weight
            y += hb[i][:, None, None] * self.seg_k[i]
        self.target, self.out = target, onto(geom, y)
        return self.out


def dopri5_systems(field, t, x, dt, geom, rng=None, sigma=0.0, *, rtol=1e-8, atol=1e-10, **_):
    r"""Dormand–Prince 5(4) with a step size of its own for every system of a stack (S, n, d).

    A batch of independent systems sharing one adaptive step moves at the pace of the system in
    the fastest transient; here every system takes the steps its own embedded error allows (RMS
    over its entries, scaled by ``atol + rtol·|x|``; accepted when <= 1; step factor
    :math:`\mathrm{clip}(0.9\,err^{-1/5}, 0.2, 5)`), each inner stage evaluating only the systems
    that have not yet passed the outer target t + dt (the field's ``systems(idx)``:
    :class:`particles.Ensemble` and its settling field; ``systems(idx)`` returns ``v(ts, xs)``,
    the velocity of those systems at their own times ts). The steps do not stop at the targets
    (the save times): a system steps past one, and its state there is Shampine's quartic
    interpolant of the step that covers it (the dense output of Dormand–Prince; error of the
    order of the step's own), retracted onto the sphere. A system whose last step already covers
    the next target costs no evaluation; the next outer step continues from each system's last
    accepted point (a first stage evaluated anew: the field may have changed at the target, e.g.
    systems certified settled or tokens merged). The outer ``err`` is 0: the outer controller
    only lands on targets. A field without ``systems`` is one system (then this is dopri5 with an
    I-controller and dense output).
    """
    key, systems = field, getattr(field, "systems", None)
    single = not callable(systems)
    if single:  # one system: the whole state (then this is dopri5 with an I-controller)
        x, systems = x[None], _WholeState(field).systems
    target = t + dt
    c = _Carry.of(key, t, x, dt)
    active = np.nonzero(c.t < target - 1e-12 * max(1.0, abs(target)))[0]
    f = systems(active) if active.size else None
    k1 = None
    while active.size:
        xa, ta, hs = c.x[active], c.t[active], c.h[active]
        if k1 is None:
            k1 = f(ta, xa)
        with np.errstate(over="ignore", invalid="ignore"):
            try:
                y5, diff, k = dp_stages(f, xa, hs[:, None, None], k1, lambda cc, ta=ta, hs=hs: ta + cc * hs)
                err = scaled_rms(diff, xa, y5, rtol, atol, axis=(1, 2))
            except SolverError:  # a stage the field refuses: every system of this trial retries shorter
                y5, err, k = xa, np.full(active.size, np.inf), None
        ok = err <= 1.0
        fac = _CONTROL.factors(err)
        check_underflow((hs * fac)[~ok], t, " in a system of the stack", "Lower beta, or loosen rtol.")
        c.h[active] = hs * fac
        acc = active[ok]
        c.t[acc] = ta[ok] + hs[ok]
        cross = ok & (c.t[active] >= target)  # accepted steps past the target: the interpolant's
        if cross.any():
            at = active[cross]
            c.seg_t[at], c.seg_h[at], c.seg_x[at] = ta[cross], hs[cross], xa[cross]
            c.seg_k[:, at] = k[:, cross]
        c.x[acc] = onto(geom, y5[ok])
        k1 = k1 if k is None else np.where(ok[:, None, None], k[6], k1)
        still = c.t[active] < target
        if not np.all(still):
            active, k1 = active[still], k1[still]
            f = systems(active) if active.size else f
    out = c.interpolate(target, geom)
    return (out[0] if single else out), 0.0

