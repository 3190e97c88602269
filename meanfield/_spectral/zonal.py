r"""The Gegenbauer discretisation of zonal densities on S^{d-1} and :class:`ZonalMeasure`. (module docstring of :mod:`meanfield.spectral`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import roots_gegenbauer

from particles.validation import (
    InvalidParameterError,
    check_callable,
    check_param,
    check_real_array,
    check_returned,
)

from .circle import _tail
from .kernels import _fh_log, _scalar_heads
from .stepping import _suggest_L

# ------------------------------------------------------------------ zonal S^{d-1}


def _gegenbauer_orthonormal(L, t, d):
    """q_l(t), l = 0..L, orthonormal for the law of <x, e> under σ on S^{d-1}: shape (len(t), L+1).

    Three-term recurrence of the orthonormal polynomials, t q_l = a_{l+1} q_{l+1} + a_l q_{l-1},
    a_{l+1}² = (l+1)(l+2ν) / (4(l+ν)(l+ν+1)): no Gamma-function normalisation, no overflow at any d.
    """
    nu = (d - 2) / 2
    Q = np.zeros((len(t), L + 1))
    Q[:, 0] = 1.0
    if L == 0:
        return Q
    a = np.sqrt((np.arange(L) + 1) * (np.arange(L) + 2 * nu) / (4 * (np.arange(L) + nu) * (np.arange(L) + nu + 1)))
    Q[:, 1] = t / a[0]
    for l in range(1, L):
        Q[:, l + 1] = (t * Q[:, l] - a[l - 1] * Q[:, l - 1]) / a[l]
    return Q


class _Zonal:
    """Coefficients c_l, l = 0..L, of ρ(<x, e>) = Σ c_l q_l(<x, e>) on S^{d-1} (scalar heads)."""

    max_L = 4096

    def __init__(self, model, L, d):
        self.model, self.L, self.d = model, L, d
        l = np.arange(L + 1)
        self.laplacian = -(l * (l + d - 2)).astype(float)
        self.nq = L + math.ceil(L / 2) + 2  # exact projection of degree-2L products onto degree ≤ L
        t, w = _gauss_gegenbauer(self.nq, d)
        self.t, self.w = t, w
        self.Q = _gegenbauer_orthonormal(L, t, d)
        self.A = (self.Q * w[:, None]).T
        self.phi, self.zs = _potential_multipliers(model, l, d)

    def with_L(self, L):
        return _Zonal(self.model, L, self.d)

    def pad(self, c):
        out = np.zeros(self.L + 1)
        out[:len(c)] = c[:self.L + 1]
        return out

    def rhs(self, c):
        Q, A, lap = self.Q, self.A, self.laplacian
        rho, lrho = Q @ c, Q @ (lap * c)
        if self.model.kind == "usa":
            pc = self.phi * c
            Phi, lPhi = Q @ pc, Q @ (lap * pc)
        else:
            Phi = self._log_potential(c)
            lPhi = Q @ (lap * (A @ Phi))
        return 0.5 * (lap * (A @ (rho * Phi)) + A @ (rho * lPhi - Phi * lrho)) * -1.0

    def _log_potential(self, c):
        Phi = np.zeros(len(self.t))
        for amp, zs in self.zs:
            Z = self.Q @ (zs * c)
            Phi += amp * np.log(np.maximum(Z, 1e-300))
        return Phi + self.Q @ (self.phi * c)

    def norm(self, c):
        return float(np.sqrt(np.sum(c * c)))

    def energy_by_degree(self, c):
        return c * c

    def tail(self, c):
        return _tail(self, c)

    def sufficient_L(self, c, tol):
        return _suggest_L(self.L, self.energy_by_degree(c), self.tail(c), tol)

    def energy(self, c):
        return _funk_hecke_energy(self.model, np.arange(self.L + 1), self.d, c * c)


def _gauss_gegenbauer(n, d):
    """Nodes and weights (summing to 1) of the law of <x, e> under σ on S^{d-1}: ∝ (1-t²)^{(d-3)/2} dt."""
    if d == 3:
        t, w = np.polynomial.legendre.leggauss(n)
    else:
        t, w = roots_gegenbauer(n, (d - 2) / 2)
    return t, w / w.sum()


def _potential_multipliers(model, l, d):
    """Φ = Σ_l φ_l c_l Y_l for USA heads (and the a = 0 limit of any head, Φ = μ<x, m>); for softmax
    heads the list of (μ/a, scaled Funk–Hecke coefficients ĝ_a(l) e^{-|a|}) of the partition function."""
    lam, mu = _scalar_heads(model)
    c = model.log_time_scale if model.kind == "usa" else 0.0
    phi = np.zeros(len(l))
    zs = []
    for la, m in zip(lam, mu):
        a = model.beta * la
        if a == 0:
            # G(1) -> 1/d, G(l >= 2) -> 0 as a -> 0 (USA and softmax alike)
            phi += m * math.exp(-c) * np.where(l == 1, 1.0 / d, 0.0)
            continue
        sgn, lg = _fh_log(a, l, d)
        if model.kind == "usa":
            # v = e^{-c} ∇_S (μ/a) ∫ e^{a<x,y>} dμ(y): multiplier μ ĝ_a(l) e^{-c} / a
            if np.max(lg) - c > 700:
                raise InvalidParameterError("USA velocity overflows: build the model with log_time_scale='auto'.")
            phi += m * sgn * np.exp(lg - c) / a
        else:
            zs.append((m / a, sgn * np.exp(lg - abs(a))))
    return phi, zs


def _funk_hecke_energy(model, l, d, energy_by_degree):
    """E_multi = Σ_h (1/2β) Σ_l ĝ_{a_h}(l) ||ρ_l||² for scalar heads (Funk–Hecke)."""
    if model.beta == 0:
        return np.inf
    lam, _ = _scalar_heads(model)
    e = 0.0
    for la in lam:
        sgn, lg = _fh_log(model.beta * la, l, d)
        e += float(np.sum(sgn * np.exp(lg) * energy_by_degree))
    return e / (2 * model.beta)


# ------------------------------------------------------------------ zonal measures


@dataclass(frozen=True, eq=False)
class ZonalMeasure:
    r"""A measure on :math:`S^{d-1}` whose density with respect to σ depends on
    :math:`\langle x, e\rangle` only: :math:`d\mu = \rho(\langle x, e\rangle)\,d\sigma`.

    Parameters
    ----------
    density_fn : callable
        ``density_fn(points (m, d)) -> (m,)``, non-negative (normalised here); it is checked to
        be zonal about ``axis`` (rotating points about the axis must not change it).
    d : int ≥ 3
    axis : array_like (d,), optional
        The axis e (normalised); default the last basis vector.

    Examples
    --------
    >>> mu = ZonalMeasure(lambda x: 1 + 0.5 * x[:, -1], d=8)
    >>> mu.profile(np.array([0.0, 1.0])).round(3)
    array([1. , 1.5])
    """

    density_fn: object
    d: int
    axis: np.ndarray | None = None

    def __post_init__(self):
        caller = "ZonalMeasure"
        check_callable(self.density_fn, "density_fn", caller, signature="density_fn(points (m, d)) -> (m,)")
        d = check_param(self.d, "d", caller, low=3, integer=True)
        e = np.eye(d)[-1] if self.axis is None else check_real_array(self.axis, "axis", caller, ndim=1)
        if e.shape != (d,) or np.linalg.norm(e) == 0:
            raise InvalidParameterError(f"axis of {caller} must be a non-zero vector of shape ({d},); got {e.shape}.")
        e = e / np.linalg.norm(e)
        object.__setattr__(self, "d", d)
        object.__setattr__(self, "axis", e)
        # zonality: the density at x and at a rotation of x about e (same <x, e>) must agree
        rng = np.random.default_rng(0)
        x = rng.standard_normal((64, d))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        t = x @ e
        u = rng.standard_normal((64, d))
        u -= np.outer(u @ e, e)
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        y = t[:, None] * e + np.sqrt(1 - t * t)[:, None] * u
        fx, fy = self._eval(x), self._eval(y)
        scale = max(float(np.abs(fx).max()), 1e-300)
        if np.max(np.abs(fx - fy)) > 1e-10 * scale:
            raise InvalidParameterError(
                f"density_fn of {caller} is not zonal about the axis: it changed by "
                f"{np.max(np.abs(fx - fy)) / scale:.1e} (relative) between points with the same <x, e>. "
                "Pass a density that depends on x only through <x, axis> (e.g. lambda x: f(x @ axis)), "
                "or use a GridMeasure on S^1 or S^2."
            )

    def _eval(self, x):
        rho = check_returned(self.density_fn(x), "density_fn(points)", (len(x),), "ZonalMeasure")
        if np.any(rho < 0):
            raise InvalidParameterError("density_fn of ZonalMeasure must return non-negative values.")
        return rho

    def _points(self, t):
        """Points with <x, e> = t on one meridian."""
        e = self.axis
        perp = np.eye(self.d)[int(np.argmin(np.abs(e)))]
        perp = perp - (perp @ e) * e
        perp /= np.linalg.norm(perp)
        return t[:, None] * e + np.sqrt(np.clip(1 - t * t, 0, None))[:, None] * perp

    def profile(self, t) -> np.ndarray:
        """The (unnormalised) density as a function of t = <x, e> ∈ [-1, 1]."""
        t = check_real_array(t, "t", "ZonalMeasure.profile", ndim=1)
        return self._eval(self._points(np.clip(t, -1, 1)))
