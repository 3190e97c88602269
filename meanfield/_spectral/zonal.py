r"""The Gegenbauer geometry of zonal densities on S^{d-1} and :class:`ZonalMeasure` (module docstring of
:mod:`meanfield.spectral`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from particles.extend import scalar_heads
from particles.validation import (
    NONE,
    AnyOf,
    Array,
    Function,
    Integer,
    InvalidParameterError,
    Relation,
    check_real_array,
    check_returned,
    declare,
)

from ..measure import sphere_name
from .shared import (
    fh_log,
    funk_hecke_energy,
    gauss_gegenbauer,
    gegenbauer_orthonormal,
    potential_multipliers,
    recurrence,
    spectral_tail,
    suggest_L,
)

# ------------------------------------------------------------------ zonal S^{d-1}


def _gegenbauer_derivative(L, t, d):
    """q_l'(t), l = 0..L, shape (len(t), L+1): the recurrence differentiated,
    q_l + t q_l' = a_{l+1} q_{l+1}' + a_l q_{l-1}' (stable forward, like the values)."""
    Q = gegenbauer_orthonormal(L, t, d)
    D = np.zeros_like(Q)
    if L == 0:
        return D
    a = recurrence(L, d)
    D[:, 1] = 1.0 / a[0]
    for l in range(1, L):
        D[:, l + 1] = (Q[:, l] + t * D[:, l] - a[l - 1] * D[:, l - 1]) / a[l]
    return D


def _flux_weights(L, d):
    r"""(u_l, v_l), l = 0..L, of :math:`(1-t^2)q_l' = u_l q_{l-1} - v_l q_{l+1}`: u_l = (l+d-2) a_l,
    v_l = l a_{l+1} (the operator (1-t²)d/dt maps degree l to l ± 1 only; its adjoint in L²(w) is
    (d-1)t - (1-t²)d/dt, whose leading coefficient on q_{l-1} gives u_l)."""
    a = recurrence(L + 1, d)
    l = np.arange(L + 1, dtype=float)
    u = np.zeros(L + 1)
    u[1:] = (l[1:] + d - 2) * a[:L]
    return u, l * a[: L + 1]


class Zonal:
    """Coefficients c_l, l = 0..L, of ρ(<x, e>) = Σ c_l q_l(<x, e>) on S^{d-1} (scalar heads).

    ``Zonal(model, L, d)`` is the discretisation at band limit L; :meth:`read` gives the geometry of a
    :class:`ZonalMeasure` (``data``, no band limit yet), whose :meth:`with_L` and :meth:`initial` give the
    discretisation and the initial coefficients at any band limit.
    """

    name = "zonal"
    max_L = 4096

    def __init__(self, model, L=None, d=None, data=None):
        self.model, self.L, self.d, self.data = model, L, d, data
        if L is None:
            return  # the geometry of a measure, before a band limit is chosen
        l = np.arange(L + 1)
        self.laplacian = -(l * (l + d - 2)).astype(float)
        # the flux ρΦ' (degree ≤ 2L - 1) against q_{l±1}, l ≤ L: exact with (3L + 1)/2 nodes
        self.nq = L + math.ceil(L / 2) + 2
        self.t, self.w = gauss_gegenbauer(self.nq, d)
        self.Q = gegenbauer_orthonormal(L + 1, self.t, d)  # degree L + 1 for the flux
        self.u, self.v = _flux_weights(L, d)
        self.phi, self.zs = potential_multipliers(model, l, d)
        # Φ's multipliers decay like (a/2)^l / l!: its derivative needs only the degrees they reach
        mult = np.abs(self.phi) + sum(np.abs(z) for _, z in self.zs)
        live = np.flatnonzero(mult > 1e-40 * max(mult.max(), 1e-300))
        self.K = int(live[-1]) + 1 if len(live) else 1
        self.dQ = _gegenbauer_derivative(self.K - 1, self.t, d)

    # ---- reading a measure (discretisation() asks the geometry that reads it)
    @staticmethod
    def reads(mu0):
        """Whether mu0 is this geometry's data (a ZonalMeasure; :meth:`read` checks the rest)."""
        return isinstance(mu0, ZonalMeasure)

    @classmethod
    def read(cls, mu0, model):
        """The geometry of a ZonalMeasure (Gegenbauer coefficients by Gauss–Gegenbauer quadrature), or a clear
        refusal."""
        if mu0.d != model.d:
            raise InvalidParameterError(f"the ZonalMeasure lives on S^{mu0.d - 1} but the model has d = {model.d}.")
        if scalar_heads(model.M, model.W) is None:
            raise InvalidParameterError(
                "scheme 'spectral' with a ZonalMeasure needs scalar heads M_h = lambda_h I, W_h = mu_h I "
                "(only these keep a zonal density zonal); build the model with MultiHead.scalar."
            )
        return cls(model, None, mu0.d, mu0)

    @property
    def L_max(self):
        """The largest band limit the data resolves (a density function: any up to the cap)."""
        return self.max_L

    def initial(self, L):
        """The data's coefficients at band limit L (Gauss–Gegenbauer quadrature of its profile)."""
        d = self.d
        n = max(2 * L + 2, 64)
        t, w = gauss_gegenbauer(n, d)
        rho = self.data.profile(t)
        Q = gegenbauer_orthonormal(L, t, d)
        c = (Q * w[:, None]).T @ rho
        if not c[0] > 0:
            raise InvalidParameterError(
                "density_fn of the ZonalMeasure integrates to zero on the Gauss-Gegenbauer nodes: pass a "
                "density with positive mass (e.g. lambda x: 1 + 0.5 * x[:, -1])."
            )
        return c / c[0]

    def route_hint(self):
        """The zonal route is the fastest already."""
        return ""

    def with_L(self, L):
        return Zonal(self.model, L, self.d, self.data)

    def pad(self, c, square=False):  # (``square`` matters only for S^2's axial discretisation)
        out = np.zeros(self.L + 1)
        out[:len(c)] = c[:self.L + 1]
        return out

    def rhs(self, c):
        r"""dc_l/dt = ⟨ρ∇Φ, ∇q_l⟩ (the weak form of -div(ρ∇Φ)) = u_l g_{l-1} - v_l g_{l+1}, g the
        coefficients of the flux ρΦ' (Gauss quadrature, degrees 0..L+1). A single factor ~ l meets
        the round-off of g, where the strong form Δ(ρΦ) multiplied it by l(l+d-2)."""
        K = self.K
        rho = self.Q[:, : self.L + 1] @ c
        dPhi = self.dQ @ (self.phi[:K] * c[:K])
        if self.model.attention.normalised:  # softmax heads: each divided by its partition function
            for amp, zs in self.zs:
                Z = self.Q[:, :K] @ (zs[:K] * c[:K])
                dPhi += amp * (self.dQ @ (zs[:K] * c[:K])) / np.maximum(Z, 1e-300)
        g = self.Q.T @ (self.w * rho * dPhi)
        out = self.u * np.concatenate([[0.0], g[: self.L]]) - self.v * g[1:]
        out[0] = 0.0  # u_0 = v_0 = 0: mass is exact
        return out

    def norm(self, c):
        return float(np.sqrt(np.sum(c * c)))

    def energy_by_degree(self, c):
        return c * c

    def tail(self, c):
        return spectral_tail(self, c)

    def sufficient_L(self, c, tol):
        return suggest_L(self.L, self.energy_by_degree(c), self.tail(c), tol)

    def energy(self, c):
        return funk_hecke_energy(self.model, np.arange(self.L + 1), self.d, c * c)


    # ---- reading a solution (SpectralSolution asks its geometry's discretisation)
    @staticmethod
    def output_grid(mu0, L, d):
        """Gauss–Gegenbauer nodes on the axis of mu0 and their weights (exact for the band-limited density)."""
        t, w = gauss_gegenbauer(L + 1, d)
        return mu0._points(t), w

    @staticmethod
    def density(sol, c, x):
        return gegenbauer_orthonormal(len(c) - 1, x @ sol.axis, sol.d) @ c

    @staticmethod
    def projected_cdf(sol, c, theta, x):
        return _zonal_projection(np.asarray(c), sol.d, theta @ sol.axis, x)

    @staticmethod
    def log_partition(sol, c, a, t):
        """log Σ_l ĝ_a(l) c_l q_l(t) (:meth:`SpectralSolution.log_partition`), for checked a and t."""
        c = np.asarray(c)
        L = len(c) - 1
        Q = gegenbauer_orthonormal(L, t, sol.d)
        if a == 0:
            return np.log(np.maximum(Q @ (c * (np.arange(L + 1) == 0)), 1e-300))
        sgn, lg = fh_log(float(a), np.arange(L + 1), sol.d)
        return np.log(np.maximum(Q @ (sgn * np.exp(lg - abs(a)) * c), 1e-300)) + abs(a)


def _zonal_projection(c, d, s, x):
    L = len(c) - 1
    q_dir = gegenbauer_orthonormal(L, s, d)  # (dirs, L+1)
    q_one = gegenbauer_orthonormal(L, np.ones(1), d)[0]
    coef = (q_dir * (c / q_one)[None, :]).T
    logB = gammaln(0.5) + gammaln((d - 1) / 2) - gammaln(d / 2)

    def density(t):
        base = np.clip(1 - t * t, 0, None)
        # (1-t²)^{(d-3)/2}/B in logs (no underflow of B at large d); the end points: 1/B at d = 3, else 0
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(base > 0, np.exp((d - 3) / 2 * np.log(base) - logB), np.exp(-logB) if d == 3 else 0.0)
        return w[:, None] * (gegenbauer_orthonormal(L, t, d) @ coef)

    gl, gw = np.polynomial.legendre.leggauss(6)
    h = np.diff(x)
    nodes = (x[:-1, None] + 0.5 * h[:, None] * (gl[None, :] + 1)).ravel()
    cell = np.einsum("j,kjd->kd", gw, density(nodes).reshape(len(h), len(gl), -1)) * (0.5 * h)[:, None]
    return np.vstack([np.zeros((1, cell.shape[1])), np.cumsum(cell, axis=0)]), density(x)


# ------------------------------------------------------------------ zonal measures


def _axis_ok(axis, d) -> bool:
    return axis is None or (axis.shape == (d,) and np.linalg.norm(axis) > 0)


@declare(density_fn=Function("a callable density_fn(points (m, d)) -> (m,)"), d=Integer(3, hint="On S^1 and S^2 "
         "use a GridMeasure (any density)."), axis=AnyOf(NONE, Array(1, what="a vector of shape (d,)")),
         relations=[Relation(("axis", "d"), _axis_ok, "must be a non-zero vector of shape (d,)",
                             breaks=[{"axis": np.zeros(3)}, {"axis": np.ones(11)}])])
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
        caller, d = "ZonalMeasure", self.d
        e = np.eye(d)[-1] if self.axis is None else self.axis / np.linalg.norm(self.axis)
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
        if not np.any(fx > 0):
            raise InvalidParameterError(
                "density_fn of ZonalMeasure is zero at every sampled point: a density needs positive mass "
                "(it is normalised here), e.g. lambda x: 1 + 0.5 * x[:, -1]."
            )
        scale = float(np.abs(fx).max())
        if np.max(np.abs(fx - fy)) > 1e-10 * scale:
            raise InvalidParameterError(
                f"density_fn of {caller} is not zonal about the axis: it changed by "
                f"{np.max(np.abs(fx - fy)) / scale:.1e} (relative) between points with the same <x, e>. "
                "Pass a density that depends on x only through <x, axis> (e.g. lambda x: f(x @ axis)), "
                "or use a GridMeasure on S^1 or S^2."
            )

    def __repr__(self) -> str:  # (the dataclass repr shows the function's address, not the sphere)
        return f"ZonalMeasure(on {sphere_name(self.d)}, axis={np.round(self.axis, 5).tolist()})"

    def _eval(self, x):
        rho = check_returned(self.density_fn(x), "density_fn(points)", (len(x),), "ZonalMeasure")
        if not np.all(np.isfinite(rho)):
            raise InvalidParameterError(
                f"density_fn of ZonalMeasure returned {int(np.sum(~np.isfinite(rho)))} non-finite values (NaN or "
                f"inf) out of {len(rho)}: it must be finite and non-negative on the whole sphere."
            )
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
        t = check_real_array(t, "t", "ZonalMeasure.profile", ndim=1, within=(-1.0, 1.0))
        return self._eval(self._points(t))
