r""":class:`SpectralSolution` and :func:`spectral_ascent`, the solver of ``scheme="spectral"`` (module
docstring of :mod:`meanfield.spectral`)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from particles import MultiHead
from particles.extend import MEAN_FIELD_KINDS, scalar_heads
from particles.validation import (
    ConvergenceWarning,
    InvalidParameterError,
    check_param,
    check_real_array,
    keyword_only,
)

from .._result import MeanFieldResult
from ..measure import GridMeasure
from .circle import Circle
from .sphere import Sphere
from .stepping import ifrk45
from .zonal import Zonal

_EPS = np.finfo(float).eps

# ------------------------------------------------------------------ the solver


@dataclass(frozen=True)
class SpectralSolution:
    r"""Coefficients of a spectral solution and what they mean.

    Attributes
    ----------
    geometry : {"circle", "sphere", "zonal"}
    d : int
    L : int
        Final band limit.
    coefficients : list of ndarray
        Per save time: Fourier c_n (n = 0..L) on S^1, C[l, m] (m ≥ 0) on S^2, Gegenbauer c_l
        (orthonormal :math:`q_l`) for zonal runs; ρ is the density with respect to σ.
    tail : ndarray (n_times,)
        Spectral tail at each save time.
    axis : ndarray (d,) or None
        The axis of a zonal run.
    """

    geometry: str
    d: int
    L: int
    coefficients: list
    tail: np.ndarray
    axis: np.ndarray | None = None

    def _basis(self, method):
        """The discretisation of this solution's geometry, which reads it (``method`` is one it has)."""
        basis = GEOMETRIES[self.geometry]
        if not hasattr(basis, method):
            have = [g for g, b in GEOMETRIES.items() if hasattr(b, method)]
            raise InvalidParameterError(f"{method} needs a solution of geometry {' or '.join(map(repr, have))}; "
                                        f"this one is {self.geometry!r}.")
        return basis

    def _index(self, k, method):
        """A save index in range (negative counts from the end), or a clear refusal."""
        n = len(self.coefficients)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise TypeError(f"k of SpectralSolution.{method} must be an integer save index; got {type(k).__name__}.")
        if not -n <= k < n:
            raise InvalidParameterError(
                f"k of SpectralSolution.{method} must be a save index in [{-n}, {n - 1}] ({n} saves); got {k}."
            )
        return int(k)

    def _points(self, points, method, name="points"):
        x = check_real_array(points, name, f"SpectralSolution.{method}", ndim=2)
        if x.shape[1] != self.d:
            raise InvalidParameterError(
                f"{name} of SpectralSolution.{method} must have shape (m, {self.d}) (points of S^{self.d - 1}); "
                f"got {x.shape}."
            )
        return x

    def density(self, k: int, points) -> np.ndarray:
        """ρ(x) (with respect to σ) at save index k at points (m, d) on the sphere.

        Examples
        --------
        >>> import particles
        >>> from meanfield import GridMeasure, circle_grid, wasserstein_ascent
        >>> pts, areas = circle_grid(32)
        >>> mu0 = GridMeasure.from_density(pts, areas, lambda x: 1 + 0.3 * x[:, 0])
        >>> res = wasserstein_ascent(mu0, particles.MultiHead.scalar([1.0], d=2, kind="softmax"), t1=0.1,
        ...                          n_saves=2, scheme="spectral", L=16)
        >>> round(float(res.info["solution"].density(0, np.array([[1.0, 0.0]]))[0]), 10)
        1.3
        """
        c = self.coefficients[self._index(k, "density")]
        return self._basis("density").density(self, c, self._points(points, "density"))

    def circle_cdf(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r"""S^1: the grid :math:`u_j = j/K` (turns, K = max(2^16, 8(L+1))), the exact CDF
        :math:`F(u) = u + \sum_{n\ge1}2\,\mathrm{Re}[c_n(e^{2\pi inu} - 1)/(2\pi in)]` and ρ on it (one
        inverse FFT each), shape (K + 1,) each.

        Examples
        --------
        >>> sol = SpectralSolution("circle", 2, 1, [np.array([1.0, 0.25])], np.zeros(1))  # ρ = 1 + cos(θ)/2
        >>> u, F, rho = sol.circle_cdf(0)
        >>> bool(np.isclose(F[len(u) // 4], 0.25 + 0.5 / (2 * np.pi)))  # F(u) = u + sin(2πu)/(4π)
        True
        """
        return self._basis("circle_cdf").circle_cdf(self, self.coefficients[self._index(k, "circle_cdf")])

    def projected_cdf(self, k: int, directions, t) -> tuple[np.ndarray, np.ndarray]:
        r"""S^2 or zonal: CDF and density (with respect to dt) of :math:`\langle\theta, x\rangle` under
        :math:`\rho\,d\sigma` at the increasing points ``t`` of [-1, 1] (t[0] = -1), for each direction
        θ; shapes (len(t), len(directions)).

        S^2: :math:`g_\theta(t) = \frac12\sum_l\rho_l(\theta)P_l(t)` (ρ_l the degree-l part: the average of
        a degree-l harmonic over :math:`\langle\theta, x\rangle = t` is its value at θ times :math:`P_l(t)`)
        and :math:`G_\theta = \frac12[\rho_0(t+1) + \sum_{l\ge1}\rho_l(\theta)(P_{l+1}-P_{l-1})/(2l+1)]`,
        exact. Zonal: :math:`g_\theta(t) = w(t)\sum_l c_l q_l(\langle\theta, e\rangle)q_l(t)/q_l(1)`, w the law
        of a coordinate under σ, G by 6-point Gauss–Legendre on each interval of ``t``.

        Examples
        --------
        >>> sol = SpectralSolution("sphere", 3, 1, [np.array([[1.0, 0], [0, 0]], complex)], np.zeros(1))
        >>> G, g = sol.projected_cdf(0, np.eye(3)[:1], np.array([-1.0, 0.0, 1.0]))
        >>> G[:, 0].tolist(), g[:, 0].tolist()  # uniform on S^2: uniform projections (Archimedes)
        ([0.0, 0.5, 1.0], [0.5, 0.5, 0.5])
        """
        basis = self._basis("projected_cdf")
        k = self._index(k, "projected_cdf")
        theta = self._points(np.atleast_2d(np.asarray(directions, dtype=float)), "projected_cdf", "directions")
        x = check_real_array(t, "t", "SpectralSolution.projected_cdf", ndim=1)
        if x[0] != -1 or np.any(np.diff(x) <= 0) or x[-1] > 1:
            raise InvalidParameterError("t of SpectralSolution.projected_cdf must increase from -1 to at most 1.")
        return basis.projected_cdf(self, self.coefficients[k], theta, x)

    @keyword_only("a", "t")
    def log_partition(self, k: int, *, a: float, t) -> np.ndarray:
        r"""Zonal: :math:`\log\int e^{a\langle x, y\rangle}\rho(y)\,d\sigma(y)` at points with
        :math:`\langle x, e\rangle = t`, by Funk–Hecke: :math:`\log\sum_l\hat g_a(l)c_lq_l(t)`.

        Examples
        --------
        >>> sol = SpectralSolution("zonal", 3, 1, [np.array([1.0, 0.0])], np.zeros(1), np.eye(3)[2])
        >>> bool(np.isclose(sol.log_partition(0, a=1.0, t=np.array([0.3]))[0], np.log(np.sinh(1.0))))
        True
        """
        basis = self._basis("log_partition")
        c = self.coefficients[self._index(k, "log_partition")]
        a = check_param(a, "a", "SpectralSolution.log_partition")
        return basis.log_partition(self, c, a, check_real_array(t, "t", "SpectralSolution.log_partition", ndim=1,
                                                                        within=(-1.0, 1.0)))


def spectral_ascent(mu0, model: MultiHead, ts, *, L=None, tol: float = 1e-10, rtol: float = 1e-10,
                    kappa=np.inf, max_steps: int = 1_000_000, max_L=None, **run):
    """The ``"spectral"`` scheme of :func:`~meanfield.wasserstein_ascent` (module docstring)."""
    caller = "wasserstein_ascent(scheme='spectral')"  # (its options arrive checked: meanfield.flow.SCHEME_OPTIONS)
    kind = model.attention
    if model.kind not in MEAN_FIELD_KINDS and not kind.has_zonal_kernel:
        raise InvalidParameterError(f"scheme 'spectral' supports kinds {list(MEAN_FIELD_KINDS)} and kinds with a zonal "
                                    f"kernel; got {model.kind!r}.")
    if kind.exp_rule is None:  # a kind of its own zonal kernel: scalar heads, on any of the geometries
        kind.zonal_kernel(model.beta)  # (its refusal where a parameter is missing, naming it)
        if scalar_heads(model.M, model.W) is None:
            raise InvalidParameterError(
                f"scheme 'spectral' runs kind {kind.name!r} through its zonal kernel: it needs scalar heads "
                "M_h = lambda_h I, W_h = mu_h I (MultiHead.scalar); use scheme='lagrangian' (weighted atoms) "
                "for other heads.")
    geometry = discretisation(mu0, model)
    solver_cap = geometry.max_L
    for name, value in (("L", L), ("max_L", max_L)):
        if value is not None and value > solver_cap:
            # refused before anything is built: tables at such band limits take minutes and gigabytes
            raise InvalidParameterError(
                f"{name}={value} of {caller} is above the cap max_L={solver_cap} of the {geometry.name} spectral "
                f"solver ({', '.join(f'{g}: {b.max_L}' for g, b in GEOMETRIES.items())}). Use {name} <= "
                f"{solver_cap}, stop earlier, or use particles."
            )
    refine = L is None
    cap = min(solver_cap, max_L or np.inf) if refine else None
    disc, c0, L = _band_limit(geometry, L, cap, tol, caller)
    if refine:  # a faster route this geometry's data may have
        hint = geometry.route_hint()
        if hint:
            warnings.warn(hint, UserWarning, stacklevel=3)
    saves, tails, field, traj = ifrk45(disc, c0, ts, kappa=kappa, rtol=rtol, tol=tol, refine=refine,
                                       max_steps=max_steps, cap=int(cap) if refine else disc.max_L,
                                       solver_cap=solver_cap, **run)
    disc = field.disc(saves[-1])
    coeffs = [disc.pad(c, square=True) for c in saves]  # (an axial S^2 run saves every order)
    energy = np.array([disc.energy(c) for c in coeffs])
    sol = SpectralSolution(geometry.name, geometry.d, disc.L, coeffs, tails,
                           getattr(mu0, "axis", None))  # (a zonal run's axis)
    pts, w = geometry.output_grid(mu0, disc.L, geometry.d)
    rho = np.array([sol.density(k, pts) for k in range(len(coeffs))])
    mass = rho * w[None, :]
    min_density = rho.min(axis=1)
    roundoff = 1e3 * _EPS * np.abs(rho).max(axis=1)
    negative = traj.t[min_density < -roundoff]
    if len(negative):
        warnings.warn(f"spectral solution negative beyond round-off at t = {np.round(negative, 6).tolist()} "
                      f"(min density {min_density.min():.2e}); raise L or lower tol.", ConvergenceWarning,
                      stacklevel=3)
    info = {"L": disc.L, "tail": tails, "min_density": min_density, "negative_times": negative,
            "mass_error": float(np.abs(mass.sum(1) - 1).max()), "n_rejected": traj.n_rejected,
            "geometry": geometry.name, "rtol": rtol, "tol": tol, "solution": sol, "band_limits": field.band_limits}
    return MeanFieldResult(traj.t, pts, mass, energy, "spectral", traj.n_steps, info, status=traj.status,
                           message=traj.message)


def _band_limit(geometry, L, cap, tol, caller):
    """(discretisation, initial coefficients, L) of the geometry of the data at the given band limit L, or, for
    L = None, at the first L = 8, 16, ... (up to ``cap`` and the data's own L_max) where the data's spectral tail
    is below tol / 10; refused when the data's tail at L (degrees past L included) is above tol."""
    L_max = geometry.L_max
    if L is None:
        L = min(8, cap)
        while True:
            disc, c0 = geometry.with_L(L), geometry.initial(L)
            if disc.tail(c0) <= tol / 10 or L >= min(L_max, cap):
                break
            L = int(min(2 * L, L_max, cap))
    else:
        disc, c0 = geometry.with_L(L), geometry.initial(L)
    # the tail of the data itself, degrees past L included (truncating them would hide it)
    tail0 = disc.tail(geometry.initial(min(2 * L, L_max)) if L_max > L else c0)
    if tail0 > tol:
        hint = f"L >= {2 * L}" if L < L_max else "a finer input grid"
        raise InvalidParameterError(
            f"L={L} is too small for the initial density of {caller}: its spectral tail is {tail0:.2e} > "
            f"tol={tol:.1e}. Use {hint} (or L=None to choose it)."
        )
    return disc, c0, L


#: the spectral geometries by name: each reads the measures it takes (``reads``, ``read``), discretises the flow
#: at any band limit (``with_L``), reads its solutions (density, CDFs, partition functions), knows its largest
#: band limit and its output quadrature
GEOMETRIES = {geometry.name: geometry for geometry in (Circle, Sphere, Zonal)}


def discretisation(mu0, model):
    """The spectral geometry of a measure the scheme accepts (a :class:`Circle`, :class:`Sphere` or
    :class:`Zonal` holding the data, at no band limit yet: its ``with_L(L)`` and ``initial(L)``), or a clear
    refusal."""
    for geometry in GEOMETRIES.values():
        if geometry.reads(mu0):
            return geometry.read(mu0, model)
    if isinstance(mu0, GridMeasure):
        raise InvalidParameterError(
            f"scheme 'spectral' on S^{mu0.points.shape[1] - 1} needs zonal data: pass a "
            "meanfield.ZonalMeasure (density a function of <x, e>) with scalar heads; GridMeasures are "
            "read on S^1 and S^2 only."
        )
    raise InvalidParameterError(
        "scheme 'spectral' needs a GridMeasure (uniform S^1 grid or sphere_quadrature(3, n=n) on S^2) or a "
        f"ZonalMeasure; got {type(mu0).__name__}."
    )
