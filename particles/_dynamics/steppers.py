"""Time steppers for the particle flow, registered in :data:`STEPPERS`.

A stepper is a :class:`Stepper`: a step function ``step(field, t, x, dt, geom, rng, sigma)
-> (x_new, err)`` with the facts a controller and the tests read. A new stepper provides:

1. the step: ``field(t, x)`` returns the velocity (tangent on the sphere); ``geom`` is a
   :class:`~particles._core.sphere.Geometry` whose ``retract`` lands the result on the manifold;
   ``sigma`` is the noise amplitude sqrt(2/κ) (0 for the ODE steppers, which ignore it);
2. ``err``: the scaled error estimate of an adaptive method (``None`` for fixed-step ones);
3. ``order`` (deterministic order, checked by the convergence test), ``strong_order`` (for
   noise), ``adaptive``, ``stochastic``, and for adaptive ones ``error_order``, the order of
   the embedded estimate, from which the step-size controller takes its exponent; optionally
   ``dense(field, t, x, dt, geom) -> ((tau, idx=None) -> x(tau))``, the step's continuous extension (the
   events of the solve loop locate their roots on it; without it, a cubic Hermite interpolant);
4. an entry in :data:`STEPPERS`; the state may be any array the field and geometry accept
   (tokens (n, d), a stack (S, n, d)).

Stage states of the Runge–Kutta methods stay in ambient space: the ambient ODE
ẋ = (I − x xᵀ) v(x) leaves the sphere invariant, so the classical order holds, and the
retraction after each step removes the O(local error) drift from the sphere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._core.blocking import Workspace
from .._core.errors import SolverError
from .per_system import dopri5_systems as _dopri5_systems
from .tableaux import (
    RKC_MAX_STAGES,
    _power_radius,
    _rkc_coefficients,
    dp_dense,
    dp_stages,
    onto,
    rkc_stages,
    scaled_rms,
)

__all__ = ["STEPPERS", "Stepper", "euler", "heun", "rk4", "dopri5", "dopri5_systems", "rkc", "euler_maruyama"]


@dataclass(frozen=True)
class Stepper:
    """A step function with its order (module docstring); calling it takes one step."""

    step: Callable
    order: int
    strong_order: float | None = None
    adaptive: bool = False
    stochastic: bool = False
    error_order: int | None = None
    dense: Callable | None = None
    #: the length of the method's stability interval on the negative real axis (|R(-z)| <= 1 for 0 <= z <= it; fixed-
    #: step deterministic methods): a step dt with dt·rate above it amplifies a mode decaying at that rate
    stability: float | None = None

    @property
    def name(self) -> str:
        return self.step.__name__

    def __call__(self, field, t, x, dt, geom, rng=None, sigma=0.0, **options):
        return self.step(field, t, x, dt, geom, rng=rng, sigma=sigma, **options)


def _register(order, strong_order=None, adaptive=False, stochastic=False, error_order=None, dense=None,
              stability=None):
    def deco(fn):
        return Stepper(fn, order, strong_order, adaptive, stochastic, error_order, dense, stability)

    return deco


@_register(order=1, strong_order=0.5, stability=2.0)
def euler(field, t, x, dt, geom, rng=None, sigma=0.0, **_):
    """Projected (renormalised) Euler: x ← R_x(dt · v(x))."""
    q = _quotient(field, x)
    if q is not None:
        return geom.retract(x, q.expand(dt * q(t, q.x))), None
    return geom.retract(x, dt * field(t, x)), None


def _quotient(field, x):
    """The field's quotient of the state x (``quotient(x)``: tokens that move with their group's representative,
    :class:`~particles._model.merging.Quotient`), or None: a step of x is then its increment over the
    representatives, expanded (the same numbers, over k tokens of n)."""
    quotient = getattr(field, "quotient", None)
    return None if quotient is None else quotient(x)


#: RK4's stability interval: the root z > 0 of |1 - z + z^2/2 - z^3/6 + z^4/24| = 1 (R(-z) = 1)
RK4_STABILITY = 2.785293563405282

#: stage buffers of rk4, per thread: at states of ~1e5 entries a fresh state-sized temporary per
#: operation costs page faults comparable to the arithmetic (measured: 20 % of an RK4 step of
#: 2048 circle systems of 32 tokens)
_RK4_WORK = Workspace()


@_register(order=4, stability=RK4_STABILITY)
def rk4(field, t, x, dt, geom, rng=None, sigma=0.0, **_):
    """Classical Runge–Kutta 4 in ambient space, then retraction.

    For a field with ``reads_state_only`` (it keeps no reference to, and caches nothing by the
    identity of, the state it is called with: :class:`particles.Ensemble`) the stage states and
    the increment of a float64 state live in reused per-thread buffers, and with ``writes_into``
    the stage velocities too (each is used up before the next stage is evaluated); other fields
    (e.g. those that cache their last evaluation by identity) get fresh arrays.
    """
    if not getattr(field, "reads_state_only", False) or x.dtype != np.float64 or _RK4_WORK.busy:
        k1 = field(t, x)
        k2 = field(t + dt / 2, x + (dt / 2) * k1)
        k3 = field(t + dt / 2, x + (dt / 2) * k2)
        k4 = field(t + dt, x + dt * k3)
        return geom.retract(x, (dt / 6) * (k1 + 2 * k2 + 2 * k3 + k4)), None
    _RK4_WORK.busy = True  # a nested call (from inside the field) takes the path above
    try:
        q = _quotient(field, x)
        if q is not None:  # the stages over the representatives alone
            return geom.retract(x, q.expand(_rk4_increment(q, t, q.x, dt))), None
        return geom.retract(x, _rk4_increment(field, t, x, dt)), None
    finally:
        _RK4_WORK.busy = False


def _rk4_increment(field, t, x, dt):
    """The increment (dt/6)(k1 + 2 k2 + 2 k3 + k4) of RK4 from x, in the thread's buffers (rk4)."""
    y, acc, tmp = (_RK4_WORK.get(name, x.shape) for name in ("y", "acc", "tmp"))
    into = {"out": _RK4_WORK.get("k", x.shape)} if getattr(field, "writes_into", False) else {}
    k = field(t, x, **into)
    np.multiply(k, dt / 6, out=acc)
    for c, w in ((dt / 2, dt / 3), (dt / 2, dt / 3), (dt, dt / 6)):
        np.multiply(k, c, out=y)
        y += x
        k = field(t + c, y, **into)
        np.multiply(k, w, out=tmp)
        acc += tmp
    return acc


@_register(order=2, stability=2.0)
def heun(field, t, x, dt, geom, rng=None, sigma=0.0, **_):
    """Heun's method (SSP-RK2, a convex combination of two Euler steps), then retraction.

    Strong-stability preserving: if each forward-Euler stage keeps a property (e.g. the
    non-negative masses of a finite-volume scheme under its CFL bound), so does the step.
    """
    q = _quotient(field, x)
    if q is not None:  # the stages over the representatives alone
        return geom.retract(x, q.expand(_heun_increment(q, t, q.x, dt))), None
    return geom.retract(x, _heun_increment(field, t, x, dt)), None


def _heun_increment(field, t, x, dt):
    """The increment (dt/2)(k1 + k2) of Heun's method from x (heun)."""
    k1 = field(t, x)
    k2 = field(t + dt, x + dt * k1)
    return (dt / 2) * (k1 + k2)


def _dopri5_dense(field, t, x, dt, geom):
    """The continuous extension of the dopri5 step from x at t with step dt (its stages evaluated
    again: only a step where an event changes sign asks for it), retracted: ``(tau, idx=None) -> x(tau)``
    (of the systems ``idx`` of a stack alone when given)."""
    _, _, K = dp_stages(field, x, dt, field(t, x), lambda c: t + c * dt)
    at = dp_dense(x, dt, K)
    return lambda tau, idx=None: onto(geom, at((tau - t) / dt, idx))


@_register(order=5, adaptive=True, error_order=4, dense=_dopri5_dense)
def dopri5(field, t, x, dt, geom, rng=None, sigma=0.0, *, rtol=1e-8, atol=1e-10, **_):
    """Dormand–Prince 5(4) step with embedded error estimate (Hairer–Nørsett–Wanner II.4).

    ``err`` is the RMS of the embedded difference scaled by ``atol + rtol·|x|``; the
    step is accepted when ``err <= 1``.
    """
    k1 = field(t, x)  # at the accepted state: a failure here is the flow's, and is raised
    # a trial step that is far too long may overflow in its stages: it is not an error,
    # the estimate comes out non-finite (or a field refuses the stage) and the controller rejects the step
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            y5, diff, _ = dp_stages(field, x, dt, k1, lambda c: t + c * dt)
        except SolverError:
            return x, float("inf")
        err = float(scaled_rms(diff, x, y5, rtol, atol))
    return onto(geom, y5), err


@_register(order=2, adaptive=True, error_order=2)
def rkc(field, t, x, dt, geom, rng=None, sigma=0.0, *, rtol=1e-8, atol=1e-10, **_):
    r"""Runge–Kutta–Chebyshev, second order, for stiff flows whose Jacobian has real (or nearly
    real) eigenvalues: clustered tokens of a gradient flow, whose contraction rate (USA: about
    :math:`e^\beta m/n` in a cluster of m) would force an explicit step below 3/rate.

    s stages are stable on :math:`h\rho \le 0.653 s^2` (ρ the spectral radius of the Jacobian),
    so the cost of a step grows like :math:`\sqrt{h\rho}` instead of :math:`h\rho`; ρ comes from
    the field's ``spectral_radius(t, x)`` when it has one (a bound: :class:`particles.Ensemble`
    with scalar heads), else from a nonlinear power iteration. ``err`` is the RKC code's local
    error estimate :math:`\frac1{15}[12(y_n - y_{n+1}) + 6h(F(y_n) + F(y_{n+1}))]` scaled by
    ``atol + rtol·|y|`` (RMS), accepted when ``err <= 1`` (Sommeijer, Shampine & Verwer 1997).
    """
    f0 = field(t, x)  # at the accepted state: a failure here is the flow's, and is raised
    with np.errstate(over="ignore", invalid="ignore"):
        radius = getattr(field, "spectral_radius", None)
        rho = radius(t, x) if callable(radius) else None
        rho = _power_radius(field, t, x, f0) if rho is None else float(rho)
        s = rkc_stages(dt * rho) if np.isfinite(rho) else RKC_MAX_STAGES + 1
        if s > RKC_MAX_STAGES:  # reject: the controller shortens the trial step
            return x, float("inf")
        mu1, rows = _rkc_coefficients(s)
        prev, y = x, x + (mu1 * dt) * f0
        try:  # a stage the field refuses (overflow) rejects the trial step, as in dopri5
            for mu, nu, mut, gam, c in rows:
                f = field(t + c * dt, y)
                prev, y = y, (1.0 - mu - nu) * x + mu * y + nu * prev + (mut * dt) * f + (gam * dt) * f0
            f1 = field(t + dt, y)
        except SolverError:
            return x, float("inf")
        err = float(scaled_rms((12.0 * (x - y) + (6.0 * dt) * (f0 + f1)) / 15.0, x, y, rtol, atol))
    return onto(geom, y), err


@_register(order=1, strong_order=0.5, stochastic=True)
def euler_maruyama(field, t, x, dt, geom, rng=None, sigma=0.0, **_):
    r"""Euler–Maruyama on the sphere: x ← R_x(dt·v + σ√dt P_x ξ), ξ ~ N(0, I_d).

    With σ = √(2/κ) the normalisation supplies the Itô drift −(d−1)/κ · x, so the noise
    is Brownian motion with generator κ⁻¹Δ_S (weak order 1, strong order 1/2).
    """
    xi = rng.standard_normal(x.shape)
    noise = geom.project_tangent(x, xi) * (sigma * np.sqrt(dt))
    return geom.retract(x, dt * field(t, x) + noise), None


dopri5_systems = Stepper(_dopri5_systems, order=5, adaptive=True, error_order=4)

STEPPERS = {
    "euler": euler, "heun": heun, "rk4": rk4, "dopri5": dopri5, "dopri5_systems": dopri5_systems, "rkc": rkc,
    "euler_maruyama": euler_maruyama,
}
