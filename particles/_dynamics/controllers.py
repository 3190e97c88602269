"""Step-size controllers of the solve loop.

A controller provides

1. ``first(dt, t0, t1)``: the first step;
2. ``propose(h, remaining, t, x)``: the step to try from state x at t, never past the next target;
3. ``decide(err, h, t, x, x_new, geom, n_steps) -> (accept, h_next)``: whether the step is
   accepted and the next step (it may raise :class:`~particles.SolverError` when the step
   cannot be resolved).

:class:`ConstantStep` serves fixed-step methods, :class:`PIDController` adaptive ones (the
PID exponents divide by ``error_order + 1`` of the stepper: Söderlind's PID control of the
embedded error estimate; pcoeff = dcoeff = 0 is the classical I-controller), and
:class:`CFLController` explicit schemes whose stable step is set by the state (finite volumes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._core.errors import SolverError
from .._core.numerics import rowdot as _rowdot

__all__ = ["ConstantStep", "PIDController", "CFLController", "MAX_MOVE", "check_underflow"]

#: a fixed step that moves a token by more than this (radians) does not resolve the flow: the
#: velocity changes by O(1) along the step (one radian is where the chord and the arc part)
MAX_MOVE = 1.0


@dataclass
class ConstantStep:
    """Fixed step ``dt``; the last step before a target lands on it exactly (a round-off
    sliver of 1e-9 dt is merged into that step); on the sphere, a step that jumps a token by
    more than :data:`MAX_MOVE` radians raises :class:`~particles.SolverError`."""

    dt: float

    def first(self, dt, t0, t1):
        return self.dt

    def propose(self, h, remaining, t, x):
        return remaining if remaining <= self.dt * (1 + 1e-9) else self.dt

    def decide(self, err, h, t, x, x_new, geom, n_steps):
        if geom.on_sphere:
            _check_resolved(x, x_new, t, n_steps, h)
        return True, self.dt


@dataclass
class PIDController:
    """Adaptive step from the embedded error estimate ``err`` (accepted when ``err <= 1``):
    ``h_next = h · clip(safety · e_n^{-(p+i+d)/k} e_{n-1}^{(p+2d)/k} e_{n-2}^{-d/k}, fmin, fmax)``
    with k = error_order + 1 and e the accepted errors (Söderlind 2003; Hairer–Wanner IV.2)."""

    error_order: int
    pcoeff: float = 0.0
    icoeff: float = 1.0
    dcoeff: float = 0.0
    safety: float = 0.9
    factormin: float = 0.2
    factormax: float = 5.0

    def __post_init__(self):
        self._prev = [1.0, 1.0]

    def first(self, dt, t0, t1):
        return (t1 - t0) / 100 if dt is None else dt

    def propose(self, h, remaining, t, x):
        return min(h, remaining)

    def factors(self, err, history=1.0):
        """The step factors of the errors ``err`` (a number, or one per independent system),
        clipped to [factormin, factormax]: factormin for a non-finite error, factormax for 0;
        ``history`` is the PID product of the earlier errors (1: the I-controller)."""
        err = np.asarray(err, dtype=float)
        k = self.error_order + 1
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            fac = self.safety * err ** (-(self.pcoeff + self.icoeff + self.dcoeff) / k) * history
        fac = np.where(err == 0, self.factormax, np.clip(fac, self.factormin, self.factormax))
        return np.where(np.isfinite(err), fac, self.factormin)

    def _factor(self, err):
        k = self.error_order + 1
        e1, e2 = self._prev
        return float(self.factors(err, e1 ** ((self.pcoeff + 2 * self.dcoeff) / k) * e2 ** (-self.dcoeff / k)))

    def decide(self, err, h, t, x, x_new, geom, n_steps):
        fac = self._factor(err)
        if not err <= 1.0:
            check_underflow(h * fac, t, f" (step {n_steps})")
            return False, h * fac
        self._prev = [max(err, 1e-10), self._prev[0]]
        return True, h * fac


@dataclass
class CFLController:
    """Step ``h = min(remaining, cfl / rate(x))``: ``rate(x)`` is the inverse of the largest
    forward-Euler step that keeps the state admissible (for upwind finite volumes
    max|v|/Δ + 2D/Δ², so that every Euler stage, hence an SSP step, keeps masses >= 0)."""

    cfl: float
    rate: object

    def first(self, dt, t0, t1):
        return t1 - t0

    def propose(self, h, remaining, t, x):
        h = min(remaining, self.cfl / (float(self.rate(x)) + 1e-300))
        if h < remaining:  # (a rate of e^400, USA heads at large beta, would take ~1e176 steps: refuse now)
            check_underflow(h, t, " (the CFL step of the finite-volume scheme)")
        return h

    def decide(self, err, h, t, x, x_new, geom, n_steps):
        return True, h


def check_underflow(h, t, where: str = "", fix: str = "Lower beta or use log_time_scale='auto'.") -> None:
    """Raise :class:`~particles.SolverError` when a proposed step (or any of an array of them) is
    below round-off of the time t: the flow is too stiff or not finite there."""
    if np.any(np.asarray(h) < 1e-14 * max(1.0, abs(t))):
        raise SolverError(f"step size underflow at t={t:.6g}{where}: the flow is too stiff or not finite here. {fix}")


def _check_resolved(x, x_new, t, n_steps, h):
    """Refuse a step that jumps a token by more than MAX_MOVE radians: the retraction keeps
    such a state on the sphere, but it is no longer a solution (e.g. USA heads at large
    beta without log_time_scale, where |v| ~ e^beta)."""
    with np.errstate(invalid="ignore"):
        # a non-finite x_new is reported by the finiteness check instead
        step = x_new - x
        chord2 = _rowdot(step, step)
        worst = float(np.max(chord2)) if chord2.size else 0.0
    if np.isfinite(worst) and worst > (2.0 * np.sin(MAX_MOVE / 2.0)) ** 2:
        angle = 2.0 * np.arcsin(min(1.0, np.sqrt(worst) / 2.0))
        raise SolverError(
            f"step {n_steps} at t={t:.6g} moved a token by {angle:.3g} rad > {MAX_MOVE:g} rad with dt={h:g}: "
            "the step does not resolve the flow. Reduce dt, use method='dopri5' (noiseless runs), or lower beta "
            "(or use log_time_scale='auto' for USA heads); with noise, the noise alone moves a token by about "
            "sqrt(2 dt / kappa) per step: lower dt or raise kappa."
        )
