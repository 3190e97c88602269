"""Time steppers for the particle flow, registered in :data:`STEPPERS`.

A stepper is a :class:`Stepper`: a step function ``step(field, t, x, dt, geom, rng, sigma)
-> (x_new, err)`` with the facts a controller and the tests read. A new stepper provides:

1. the step: ``field(t, x)`` returns the velocity (tangent on the sphere); ``geom`` is a
   :class:`~particles._core.sphere.Geometry` whose ``retract`` lands the result on the manifold;
   ``sigma`` is the noise amplitude sqrt(2/κ) (0 for the ODE steppers, which ignore it);
2. ``err``: the scaled error estimate of an adaptive method (``None`` for fixed-step ones);
3. ``order`` (deterministic order, checked by the convergence test), ``strong_order`` (for
   noise), ``adaptive``, ``stochastic``, and for adaptive ones ``error_order``, the order of
   the embedded estimate, from which the step-size controller takes its exponent;
4. an entry in :data:`STEPPERS`; the state may be any array the field and geometry accept
   (tokens (n, d), a stack (S, n, d)).

Stage states of the Runge–Kutta methods stay in ambient space: the ambient ODE
ẋ = (I − x xᵀ) v(x) leaves the sphere invariant, so the classical order holds, and the
retraction after each step removes the O(local error) drift from the sphere.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

from .._core.errors import SolverError

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

    @property
    def name(self) -> str:
        return self.step.__name__

    def __call__(self, field, t, x, dt, geom, rng=None, sigma=0.0, **options):
        return self.step(field, t, x, dt, geom, rng=rng, sigma=sigma, **options)


def _register(order, strong_order=None, adaptive=False, stochastic=False, error_order=None):
    def deco(fn):
        return Stepper(fn, order, strong_order, adaptive, stochastic, error_order)

    return deco


@_register(order=1, strong_order=0.5)
def euler(field, t, x, dt, geom, rng=None, sigma=0.0, **_):
    """Projected (renormalised) Euler: x ← R_x(dt · v(x))."""
    return geom.retract(x, dt * field(t, x)), None


@_register(order=4)
def rk4(field, t, x, dt, geom, rng=None, sigma=0.0, **_):
    """Classical Runge–Kutta 4 in ambient space, then retraction."""
    k1 = field(t, x)
    k2 = field(t + dt / 2, x + (dt / 2) * k1)
    k3 = field(t + dt / 2, x + (dt / 2) * k2)
    k4 = field(t + dt, x + dt * k3)
    return geom.retract(x, (dt / 6) * (k1 + 2 * k2 + 2 * k3 + k4)), None


@_register(order=2)
def heun(field, t, x, dt, geom, rng=None, sigma=0.0, **_):
    """Heun's method (SSP-RK2, a convex combination of two Euler steps), then retraction.

    Strong-stability preserving: if each forward-Euler stage keeps a property (e.g. the
    non-negative masses of a finite-volume scheme under its CFL bound), so does the step.
    """
    k1 = field(t, x)
    k2 = field(t + dt, x + dt * k1)
    return geom.retract(x, (dt / 2) * (k1 + k2)), None


# Dormand–Prince 5(4) tableau
_C = np.array([0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1])
_A = [
    [],
    [1 / 5],
    [3 / 40, 9 / 40],
    [44 / 45, -56 / 15, 32 / 9],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
    [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84],
]
_B5 = np.array([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0])
_B4 = np.array([5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40])
_E = _B5 - _B4


@_register(order=5, adaptive=True, error_order=4)
def dopri5(field, t, x, dt, geom, rng=None, sigma=0.0, *, rtol=1e-8, atol=1e-10, **_):
    """Dormand–Prince 5(4) step with embedded error estimate (Hairer–Nørsett–Wanner II.4).

    ``err`` is the RMS of the embedded difference scaled by ``atol + rtol·|x|``; the
    step is accepted when ``err <= 1``.
    """
    k = [field(t, x)]  # at the accepted state: a failure here is the flow's, and is raised
    # a trial step that is far too long may overflow in its stages: it is not an error,
    # the estimate comes out non-finite (or a field refuses the stage) and the controller rejects the step
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            for s in range(1, 7):
                y = x + dt * sum(a * kk for a, kk in zip(_A[s], k) if a != 0)
                k.append(field(t + _C[s] * dt, y))
        except SolverError:
            return x, float("inf")
        y5 = x + dt * sum(b * kk for b, kk in zip(_B5, k) if b != 0)
        diff = dt * sum(e * kk for e, kk in zip(_E, k))
        scale = atol + rtol * np.maximum(np.abs(x), np.abs(y5))
        err = float(np.sqrt(np.mean((diff / scale) ** 2)))
    return geom.retract(y5, np.zeros_like(y5)) if geom.on_sphere else y5, err


#: RKC damping (Sommeijer, Shampine & Verwer 1997): the stability interval is [-0.653 s², 0]
_RKC_DAMPING = 2.0 / 13.0
#: most stages per step; a trial step that needs more is rejected (the controller shortens it)
RKC_MAX_STAGES = 500


@cache
def _rkc_coefficients(s: int):
    r"""Coefficients of the s-stage second-order RKC step (Verwer, Hundsdorfer & Sommeijer 1990):
    :math:`w_0 = 1 + \epsilon/s^2`, :math:`w_1 = T_s'(w_0)/T_s''(w_0)`, :math:`b_j =
    T_j''(w_0)/T_j'(w_0)^2` (:math:`b_0 = b_1 = b_2`), :math:`a_j = 1 - b_jT_j(w_0)`; stage j >= 2 is
    :math:`Y_j = (1-\mu_j-\nu_j)Y_0 + \mu_jY_{j-1} + \nu_jY_{j-2} + \tilde\mu_j hF(Y_{j-1}) +
    \tilde\gamma_j hF(Y_0)` with :math:`\mu_j = 2b_jw_0/b_{j-1}`, :math:`\nu_j = -b_j/b_{j-2}`,
    :math:`\tilde\mu_j = 2b_jw_1/b_{j-1}`, :math:`\tilde\gamma_j = -a_{j-1}\tilde\mu_j`; the stage
    times c_j follow the same recursion for y' = 1. Returns (mu~_1, rows (mu, nu, mu~, gamma~, c_{j-1})).
    """
    w0 = 1.0 + _RKC_DAMPING / s**2
    T, dT, d2T = np.zeros(s + 1), np.zeros(s + 1), np.zeros(s + 1)
    T[0], T[1], dT[1] = 1.0, w0, 1.0
    for j in range(2, s + 1):
        T[j] = 2 * w0 * T[j - 1] - T[j - 2]
        dT[j] = 2 * T[j - 1] + 2 * w0 * dT[j - 1] - dT[j - 2]
        d2T[j] = 4 * dT[j - 1] + 2 * w0 * d2T[j - 1] - d2T[j - 2]
    w1 = dT[s] / d2T[s]
    b = np.empty(s + 1)
    b[2:] = d2T[2:] / dT[2:] ** 2
    b[0] = b[1] = b[2]
    a = 1.0 - b * T
    mu1 = b[1] * w1
    c = [0.0, mu1]
    rows = []
    for j in range(2, s + 1):
        mu, nu, mut = 2 * b[j] * w0 / b[j - 1], -b[j] / b[j - 2], 2 * b[j] * w1 / b[j - 1]
        gam = -a[j - 1] * mut
        rows.append((mu, nu, mut, gam, c[j - 1]))
        c.append(mu * c[j - 1] + nu * c[j - 2] + mut + gam)
    return mu1, tuple(rows)


def rkc_stages(h_rho: float) -> int:
    """Stages the RKC step needs for stability when h times the spectral radius is ``h_rho``:
    the smallest s >= 2 with 0.653 s² >= h ρ (with a stage of margin, as the RKC code)."""
    return max(2, 1 + int(np.sqrt(1.54 * h_rho + 1.0)))


def _power_radius(field, t, x, f0, iters: int = 20) -> float:
    """Spectral radius of the field's Jacobian at x by nonlinear power iteration (the RKC code's
    fallback): z <- F(x + δz) - F(x), |Δ F| / (δ|z|) -> ρ; times 1.2 for the estimate's shortfall."""
    z = f0 if np.any(f0) else np.sin(np.arange(x.size, dtype=float)).reshape(x.shape)
    xn = float(np.sqrt(np.sum(x * x)))
    est = 0.0
    for _ in range(iters):
        zn = float(np.sqrt(np.sum(z * z)))
        if zn == 0.0:
            break
        delta = np.sqrt(np.finfo(float).eps) * max(1.0, xn) / zn
        z = field(t, x + delta * z) - f0
        new = float(np.sqrt(np.sum(z * z))) / (delta * zn)
        if abs(new - est) <= 0.01 * new:
            est = new
            break
        est = new
    return 1.2 * est


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
        est = (12.0 * (x - y) + (6.0 * dt) * (f0 + f1)) / 15.0
        scale = atol + rtol * np.maximum(np.abs(x), np.abs(y))
        err = float(np.sqrt(np.mean((est / scale) ** 2)))
    return geom.retract(y, np.zeros_like(y)) if geom.on_sphere else y, err


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


@_register(order=5, adaptive=True, error_order=4)
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
    if not callable(systems):  # one system: the whole state (then this is dopri5 with an I-controller)
        x, systems = x[None], _WholeState(field).systems
    S = x.shape[0]
    x, tau = x.copy(), np.zeros(S)
    h = _inner_steps(key)
    h = np.full(S, float(dt)) if h is None or h.shape != (S,) else h.copy()
    active = np.arange(S)
    f, k1 = systems(active), None
    while active.size:
        if k1 is None:
            k1 = f(t + tau[active], x[active])
        xa = x[active]
        hs = np.minimum(h[active], dt - tau[active])
        with np.errstate(over="ignore", invalid="ignore"):
            k, hb = [k1], hs[:, None, None]
            try:
                for st in range(1, 7):
                    k.append(f(t + tau[active] + _C[st] * hs, xa + hb * sum(a * kk for a, kk in zip(_A[st], k) if a != 0)))
                y5 = xa + hb * sum(b * kk for b, kk in zip(_B5, k) if b != 0)
                diff = hb * sum(e * kk for e, kk in zip(_E, k))
                err = np.sqrt(np.mean((diff / (atol + rtol * np.maximum(np.abs(xa), np.abs(y5)))) ** 2, axis=(1, 2)))
            except SolverError:  # a stage the field refuses: every system of this trial retries shorter
                y5, err = xa, np.full(active.size, np.inf)
        ok = err <= 1.0
        fac = np.where(np.isfinite(err), np.clip(0.9 * np.maximum(err, 1e-10) ** -0.2, 0.2, 5.0), 0.2)
        if np.any(hs * fac < 1e-14 * max(1.0, abs(t))):
            raise SolverError(f"step size underflow at t={t:.6g} in a system of the stack: the flow is too stiff "
                              "or not finite here. Lower beta, or loosen rtol.")
        clipped = hs < h[active]
        h[active] = np.where(ok & clipped, np.maximum(h[active], hs * fac), hs * fac)
        acc = active[ok]
        x[acc] = geom.retract(y5[ok], np.zeros_like(y5[ok])) if geom.on_sphere else y5[ok]
        tau[acc] = np.where(clipped[ok], dt, tau[acc] + hs[ok])
        still = tau[active] < dt
        k1 = np.where(ok[:, None, None], k[6], k1)[still] if not np.all(np.isinf(err)) else k1[still]
        if not np.all(still):
            active = active[still]
            f = systems(active) if active.size else f
    _inner_steps(key, h)
    return (x if callable(getattr(field, "systems", None)) else x[0]), 0.0


@_register(order=1, strong_order=0.5, stochastic=True)
def euler_maruyama(field, t, x, dt, geom, rng=None, sigma=0.0, **_):
    r"""Euler–Maruyama on the sphere: x ← R_x(dt·v + σ√dt P_x ξ), ξ ~ N(0, I_d).

    With σ = √(2/κ) the normalisation supplies the Itô drift −(d−1)/κ · x, so the noise
    is Brownian motion with generator κ⁻¹Δ_S (weak order 1, strong order 1/2).
    """
    xi = rng.standard_normal(x.shape)
    noise = geom.project_tangent(x, xi) * (sigma * np.sqrt(dt))
    return geom.retract(x, dt * field(t, x) + noise), None


STEPPERS = {
    "euler": euler, "heun": heun, "rk4": rk4, "dopri5": dopri5, "dopri5_systems": dopri5_systems, "rkc": rkc,
    "euler_maruyama": euler_maruyama,
}
