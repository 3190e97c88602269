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

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["STEPPERS", "Stepper", "euler", "heun", "rk4", "dopri5", "euler_maruyama"]


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
    # a trial step that is far too long may overflow in its stages: it is not an error,
    # the estimate comes out non-finite and the controller rejects the step
    with np.errstate(over="ignore", invalid="ignore"):
        k = [field(t, x)]
        for s in range(1, 7):
            y = x + dt * sum(a * kk for a, kk in zip(_A[s], k) if a != 0)
            k.append(field(t + _C[s] * dt, y))
        y5 = x + dt * sum(b * kk for b, kk in zip(_B5, k) if b != 0)
        diff = dt * sum(e * kk for e, kk in zip(_E, k))
        scale = atol + rtol * np.maximum(np.abs(x), np.abs(y5))
        err = float(np.sqrt(np.mean((diff / scale) ** 2)))
    return geom.retract(y5, np.zeros_like(y5)) if geom.on_sphere else y5, err


@_register(order=1, strong_order=0.5, stochastic=True)
def euler_maruyama(field, t, x, dt, geom, rng=None, sigma=0.0, **_):
    r"""Euler–Maruyama on the sphere: x ← R_x(dt·v + σ√dt P_x ξ), ξ ~ N(0, I_d).

    With σ = √(2/κ) the normalisation supplies the Itô drift −(d−1)/κ · x, so the noise
    is Brownian motion with generator κ⁻¹Δ_S (weak order 1, strong order 1/2).
    """
    xi = rng.standard_normal(x.shape)
    noise = geom.project_tangent(x, xi) * (sigma * np.sqrt(dt))
    return geom.retract(x, dt * field(t, x) + noise), None


STEPPERS = {"euler": euler, "heun": heun, "rk4": rk4, "dopri5": dopri5, "euler_maruyama": euler_maruyama}
