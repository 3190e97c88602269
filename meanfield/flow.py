r"""Wasserstein gradient ascent of :math:`E_{multi}` for measures on the sphere (docs/theory.md §6).

:math:`\partial_t\mu + \operatorname{div}(\mu\, v[\mu]) = \kappa^{-1}\Delta_S\mu`, solved by one of
:data:`SCHEMES`. A scheme is a function ``scheme(mu0, model, ts, **options) -> MeanFieldResult``:

1. it takes a :class:`~meanfield.EmpiricalMeasure` or :class:`~meanfield.GridMeasure`,
   the :class:`particles.MultiHead` whose USA or softmax heads define v[μ], and the
   increasing save times ``ts``;
2. it returns the measure at each save time (atoms move, or cell masses change);
3. it conserves mass exactly and keeps masses non-negative (states its CFL or step rule).

Schemes:

- ``"lagrangian"``: weighted atoms carried by v[μ] (with n atoms of weight 1/n this *is*
  the particle flow; no noise);
- ``"fv_circle"``: finite volumes in angle on S^1, upwind fluxes, SSP-RK2 in time, explicit
  diffusion κ⁻¹∂²_θ; the velocity at the faces is an FFT convolution when every head is
  scalar (M_h = λ_h I, W_h = μ_h I), a dense kernel sum otherwise. Mass exact
  (telescoping fluxes), positivity under dt (max|v|/Δθ + 2κ⁻¹/Δθ²) ≤ 1 (enforced);
- ``"fv_sphere"``: finite volumes on the spherical Voronoi cells of a point set on S^2,
  two-point upwind fluxes through the shared Voronoi edges (velocity at the edge
  midpoints), two-point diffusion fluxes, SSP-RK2; mass exact, positivity under the
  per-cell CFL bound (enforced);
- ``"jko"``: entropic JKO (Peyré 2015) on any discretised sphere (USA heads under C3 + C4,
  the gradient-flow case), linearised step in closed form (log domain), τ = 2 dt so that
  W² + τF matches (1/(2dt))W² + F; noise κ⁻¹Δ by Lie splitting with one heat-kernel step
  (the JKO step of the entropy), so the scheme is first order in dt. The entropic blur
  adds a diffusion ≈ γ/(2τ): the default γ = max(τ/50, 2h²), h the grid spacing;
- ``"spectral"``: pseudo-spectral (:mod:`meanfield.spectral`): Fourier on S^1, spherical
  harmonics on the Gauss–Legendre grid of S^2, Gegenbauer polynomials for a
  :class:`~meanfield.ZonalMeasure` on S^{d-1}; noise exact (integrating factor), adaptive
  embedded RK 5(4), mass exact, the spectral tail checked after every step (refusal with a
  sufficient L, or refinement with ``L=None``); densities are not forced non-negative, their
  minimum is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from particles import MultiHead, SaveAt, simulate
from particles.sphere import geodesic_distance
from particles.validation import InvalidParameterError, check_choice, check_param

from .field import first_variation, measure_energy, measure_velocity
from .measure import EmpiricalMeasure, GridMeasure

__all__ = ["wasserstein_ascent", "MeanFieldResult", "SCHEMES", "circle_velocity", "SphereMesh"]


@dataclass(frozen=True)
class MeanFieldResult:
    """Output of :func:`wasserstein_ascent`.

    Attributes
    ----------
    t : ndarray (n_times,)
    points : ndarray (n_times, m, d) for Lagrangian runs, (m, d) for grid runs
    mass : ndarray (n_times, m)
        Atom weights (constant for Lagrangian runs) or cell masses.
    energy : ndarray (n_times,)
        :math:`E_{multi}[\\mu(t)]`.
    scheme : str
    n_steps : int
    info : dict
    """

    t: np.ndarray
    points: np.ndarray
    mass: np.ndarray
    energy: np.ndarray
    scheme: str
    n_steps: int = 0
    info: dict = field(default_factory=dict)

    def measure(self, k: int = -1):
        """The measure at save index k, as an EmpiricalMeasure (positive-mass atoms)."""
        pts = self.points[k] if self.points.ndim == 3 else self.points
        w = self.mass[k]
        keep = w > 0
        return EmpiricalMeasure(pts[keep], w[keep] / w[keep].sum())


def _check_model(model):
    if not isinstance(model, MultiHead) or model.kind not in ("usa", "softmax"):
        raise InvalidParameterError("model must be a particles.MultiHead with kind 'usa' or 'softmax'.")
    return model


# ------------------------------------------------------------------ Lagrangian


def _lagrangian(mu0, model, ts, *, dt=None, method="rk4", kappa=np.inf, **_):
    if not isinstance(mu0, EmpiricalMeasure):
        raise InvalidParameterError("scheme 'lagrangian' needs an EmpiricalMeasure.")
    if np.isfinite(kappa):
        raise InvalidParameterError("scheme 'lagrangian' is noiseless: use 'fv_circle' or 'jko' for kappa < inf.")
    w = mu0.weights

    def fieldfn(t, x):
        return _lagrangian_velocity(model, x, w)

    traj = simulate(mu0.points, fieldfn, t0=ts[0], t1=ts[-1], dt=dt, method=method, save=SaveAt(ts=ts),
                    geometry=model.geometry)
    energy = np.array([measure_energy(model, x, w) for x in traj.x])
    return MeanFieldResult(traj.t, traj.x, np.tile(w, (len(ts), 1)), energy, "lagrangian", traj.n_steps)


def _lagrangian_velocity(model, x, w):
    # inside the solve loop: the atoms were validated once, at the start
    from .field import _velocity

    return _velocity(model, x, w, x)


# ------------------------------------------------------------------ finite volumes on S^1


def _scalar_heads(model):
    d = model.d
    lam = model.M[:, 0, 0]
    mu = model.W[:, 0, 0]
    eye = np.eye(d)
    if np.array_equal(model.M, lam[:, None, None] * eye) and np.array_equal(model.W, mu[:, None, None] * eye):
        return lam, mu
    return None


def circle_velocity(model: MultiHead, mass: np.ndarray) -> np.ndarray:
    r"""Tangential velocity :math:`v[\mu](\theta_{k+1/2})` at the cell faces of the uniform
    S^1 grid (cells centred at :math:`\theta_k = (k + 1/2)\Delta`, faces at :math:`(k+1)\Delta`).

    Scalar heads: :math:`v_f = \sum_h \mu_h \frac{\sum_k g_h(\theta_f-\theta_k) p_k}{[\sum_k e^{a_h\cos(\theta_f-\theta_k)}p_k]}`
    with :math:`g(\delta) = -e^{a\cos\delta}\sin\delta`, :math:`a = \beta\lambda_h` (the bracket
    for softmax only), both circular convolutions done by FFT in O(m log m).
    """
    m = mass.size
    delta = 2 * np.pi / m
    sc = _scalar_heads(model)
    if sc is None:
        th_c = (np.arange(m) + 0.5) * delta
        th_f = (np.arange(m) + 1.0) * delta
        centres = np.stack([np.cos(th_c), np.sin(th_c)], 1)
        faces = np.stack([np.cos(th_f), np.sin(th_f)], 1)
        v = measure_velocity(model, centres, np.maximum(mass, 0) / mass.sum(), at=faces)
        return v[:, 0] * -np.sin(th_f) + v[:, 1] * np.cos(th_f)
    lam, mu = sc
    # θ_f − θ_k = (f − k)Δ + Δ/2: sample the kernel at jΔ + Δ/2 and convolve circularly
    lag = (np.arange(m) + 0.5) * delta
    P = np.fft.rfft(mass)
    v = np.zeros(m)
    for lh, mh in zip(lam, mu):
        a = model.beta * lh
        ker = np.exp(a * np.cos(lag) - abs(a))  # shifted: no overflow at any β
        num = np.fft.irfft(np.fft.rfft(-ker * np.sin(lag)) * P, n=m)
        if model.kind == "softmax":
            den = np.fft.irfft(np.fft.rfft(ker) * P, n=m)
            v += mh * num / den
        else:
            scale = abs(a) - model.log_time_scale
            if scale > 700:
                raise InvalidParameterError("USA velocity overflows: build the model with log_time_scale='auto'.")
            v += mh * np.exp(scale) * num
    return v


def _ssp_rk2(rhs, p, ts, cfl, max_steps):
    """SSP-RK2 (Heun) from p over the save times; ``rhs(p) -> (dp/dt, rate)`` where
    dt · rate ≤ 1 keeps a forward-Euler stage, hence the whole step, non-negative."""
    t = float(ts[0])
    masses, n_steps = [p.copy()], 0
    for target in ts[1:]:
        while t < target - 1e-14 * max(1.0, abs(target)):
            L1, rate = rhs(p)
            h = min(target - t, cfl / (rate + 1e-300))
            p1 = p + h * L1
            L2, _ = rhs(p1)
            p = 0.5 * (p + p1 + h * L2)
            t += h
            n_steps += 1
            if n_steps > max_steps:
                raise InvalidParameterError(f"max_steps={max_steps} reached at t={t:.4g}; coarsen the grid.")
        masses.append(p.copy())
    return np.array(masses), n_steps


def _fv_rhs(model, p, D, delta):
    v = circle_velocity(model, p)  # face f sits between cells f and f+1
    flux = np.maximum(v, 0) * p + np.minimum(v, 0) * np.roll(p, -1)
    if D > 0:
        flux -= D * (np.roll(p, -1) - p) / delta
    flux /= delta
    # positivity of forward Euler: dt (max|v|/Δ + 2D/Δ²) ≤ 1
    return -(flux - np.roll(flux, 1)), float(np.abs(v).max()) / delta + 2 * D / delta**2


def _fv_circle(mu0, model, ts, *, cfl=0.45, kappa=np.inf, max_steps=10_000_000, **_):
    if not isinstance(mu0, GridMeasure) or mu0.points.shape[1] != 2:
        raise InvalidParameterError("scheme 'fv_circle' needs a GridMeasure on the uniform S^1 grid (circle_grid).")
    m = len(mu0.mass)
    delta = 2 * np.pi / m
    expected = np.stack([np.cos((np.arange(m) + 0.5) * delta), np.sin((np.arange(m) + 0.5) * delta)], 1)
    if not np.allclose(mu0.points, expected, atol=1e-12):
        raise InvalidParameterError("scheme 'fv_circle' needs the points of meanfield.circle_grid(m).")
    D = 0.0 if not np.isfinite(kappa) else 1.0 / kappa
    masses, n_steps = _ssp_rk2(lambda p: _fv_rhs(model, p, D, delta), mu0.mass.copy(), ts, cfl, max_steps)
    energy = np.array([measure_energy(model, mu0.points, q / q.sum()) for q in masses])
    return MeanFieldResult(np.asarray(ts), mu0.points, masses, energy, "fv_circle", n_steps,
                           {"min_mass": float(masses.min()), "mass_error": float(np.abs(masses.sum(1) - 1).max())})


# ------------------------------------------------------------------ finite volumes on S^2


@dataclass(frozen=True)
class SphereMesh:
    """Spherical Voronoi cells of a point set on S^2 and the two-point flux geometry.

    ``edges`` (E, 2) index pairs of Delaunay neighbours; ``length`` the geodesic length
    of their shared Voronoi edge; ``dist`` the geodesic distance of the two centres;
    ``mid`` and ``normal`` the edge midpoint and unit tangent pointing from k to l.
    """

    points: np.ndarray
    areas: np.ndarray
    edges: np.ndarray
    length: np.ndarray
    dist: np.ndarray
    mid: np.ndarray
    normal: np.ndarray

    @classmethod
    def from_points(cls, y: np.ndarray) -> SphereMesh:
        from scipy.spatial import ConvexHull, SphericalVoronoi

        areas = SphericalVoronoi(y, radius=1.0).calculate_areas()
        tri = ConvexHull(y).simplices
        a, b, c = y[tri[:, 0]], y[tri[:, 1]], y[tri[:, 2]]
        cc = np.cross(b - a, c - a)
        cc *= np.sign(np.einsum("ij,ij->i", cc, a + b + c))[:, None]
        cc /= np.linalg.norm(cc, axis=1, keepdims=True)  # circumcentres = Voronoi vertices
        pairs = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
        owner = np.tile(np.arange(len(tri)), 3)
        key = np.sort(pairs, axis=1)
        order = np.lexsort((key[:, 1], key[:, 0]))
        key, owner = key[order], owner[order]
        # every Delaunay edge is shared by exactly two triangles: consecutive after sorting
        edges = key[0::2]
        t1, t2 = owner[0::2], owner[1::2]
        length = geodesic_distance(cc[t1], cc[t2])
        yk, yl = y[edges[:, 0]], y[edges[:, 1]]
        mid = yk + yl
        mid /= np.linalg.norm(mid, axis=1, keepdims=True)
        normal = (yl - yk) - np.einsum("ij,ij->i", yl - yk, mid)[:, None] * mid
        normal /= np.linalg.norm(normal, axis=1, keepdims=True)
        return cls(y, areas, edges, length, geodesic_distance(yk, yl), mid, normal)


def _fv_sphere_rhs(model, mesh, p, D):
    u = np.einsum("ij,ij->i", measure_velocity(model, mesh.points, p / p.sum(), at=mesh.mid), mesh.normal)
    rho = p / mesh.areas
    k, l = mesh.edges[:, 0], mesh.edges[:, 1]
    flux = mesh.length * (np.maximum(u, 0) * rho[k] + np.minimum(u, 0) * rho[l])  # mass per time, k → l
    if D > 0:
        flux -= D * mesh.length * (rho[l] - rho[k]) / mesh.dist
    out = np.bincount(l, flux, minlength=len(p)) - np.bincount(k, flux, minlength=len(p))
    rate = np.bincount(k, mesh.length * (np.abs(u) + D / mesh.dist), minlength=len(p)) + np.bincount(
        l, mesh.length * (np.abs(u) + D / mesh.dist), minlength=len(p))
    return out, float(np.max(rate / mesh.areas))


def _fv_sphere(mu0, model, ts, *, cfl=0.45, kappa=np.inf, max_steps=10_000_000, **_):
    if not isinstance(mu0, GridMeasure) or mu0.points.shape[1] != 3:
        raise InvalidParameterError("scheme 'fv_sphere' needs a GridMeasure on S^2 (e.g. fibonacci_sphere points).")
    mesh = SphereMesh.from_points(mu0.points)
    D = 0.0 if not np.isfinite(kappa) else 1.0 / kappa
    masses, n_steps = _ssp_rk2(lambda p: _fv_sphere_rhs(model, mesh, p, D), mu0.mass.copy(), ts, cfl, max_steps)
    energy = np.array([measure_energy(model, mu0.points, q / q.sum()) for q in masses])
    return MeanFieldResult(np.asarray(ts), mu0.points, masses, energy, "fv_sphere", n_steps,
                           {"min_mass": float(masses.min()), "mass_error": float(np.abs(masses.sum(1) - 1).max()),
                            "n_edges": len(mesh.edges)})


# ------------------------------------------------------------------ entropic JKO


def _spacing(y: np.ndarray) -> float:
    """Median nearest-neighbour geodesic distance of a point set."""
    D = geodesic_distance(y[:, None, :], y[None, :, :])
    np.fill_diagonal(D, np.inf)
    return float(np.median(D.min(axis=1)))


def _jko(mu0, model, ts, *, dt, gamma=None, kappa=np.inf, **_):
    """Entropic JKO with the energy linearised at p_t (closed form), noise by Lie splitting."""
    if not isinstance(mu0, GridMeasure):
        raise InvalidParameterError("scheme 'jko' needs a GridMeasure.")
    if model.kind != "usa" or not (model.symmetric and model.aligned):
        raise InvalidParameterError(
            "scheme 'jko' is the Wasserstein gradient ascent of E_multi, which is the flow of USA heads "
            "under score symmetry and value alignment (M_h = M_h^T = W_h); use 'fv_circle' for softmax heads."
        )
    dt = check_param(dt, "dt", "wasserstein_ascent(jko)", low=0.0, low_open=True)
    tau = 2.0 * dt
    y = mu0.points
    h = _spacing(y)
    # the Gibbs kernel must reach the neighbouring cells (γ ≳ h²) and blur little (γ ≪ τ)
    gamma = max(tau / 50, 2 * h * h) if gamma is None else check_param(
        gamma, "gamma", "wasserstein_ascent(jko)", low=0.0, low_open=True)
    D2 = geodesic_distance(y[:, None, :], y[None, :, :]) ** 2
    logxi = -D2 / gamma
    sigma = tau / gamma
    logheat = None
    if np.isfinite(kappa):
        # JKO of the entropy is the heat flow (Jordan–Kinderlehrer–Otto): one heat step of
        # duration s = dt/κ, kernel ∝ ω_l exp(−d²/(4s)) row-normalised (mass exact, positive)
        s_heat = dt / kappa
        logK = -D2 / (4 * s_heat) + np.log(mu0.areas)[None, :]
        logheat = logK - logsumexp(logK, axis=1, keepdims=True)
    p = mu0.mass.copy()
    t = float(ts[0])
    masses, n_steps = [p.copy()], 0
    for target in ts[1:]:
        while t < target - 1e-12:
            w = -first_variation(model, y, p)
            with np.errstate(divide="ignore"):
                logp = np.log(p)  # empty cells: −inf, on purpose (they stay empty in the scalings)
            # p⁺ = e^{−σw} ⊙ ξᵀ(p ⊘ ξ e^{−σw}), in the log domain (POT's sinkhorn_log template)
            logb = -sigma * w
            loga = logp - logsumexp(logxi + logb[None, :], axis=1)
            logq = logb + logsumexp(logxi + loga[:, None], axis=0)
            if logheat is not None:
                logq = logsumexp(logheat + logq[:, None], axis=0)
            p = np.exp(logq - logsumexp(logq))  # mass is 1 up to round-off: renormalise it
            t += dt
            n_steps += 1
        masses.append(p.copy())
    masses = np.array(masses)
    energy = np.array([measure_energy(model, y, q) for q in masses])
    return MeanFieldResult(np.asarray(ts), y, masses, energy, "jko", n_steps, {"gamma": gamma, "tau": tau})


def _spectral(mu0, model, ts, **options):
    from .spectral import spectral_ascent

    return spectral_ascent(mu0, model, ts, **options)


SCHEMES = {"lagrangian": _lagrangian, "fv_circle": _fv_circle, "fv_sphere": _fv_sphere, "jko": _jko,
           "spectral": _spectral}


def wasserstein_ascent(mu0, model, *, t1: float, n_saves: int = 11, scheme: str = "lagrangian", t0: float = 0.0,
                       **options) -> MeanFieldResult:
    r"""Solve the mean-field flow from μ0 up to t1 and save ``n_saves`` equally spaced states.

    Parameters
    ----------
    mu0 : EmpiricalMeasure or GridMeasure
    model : particles.MultiHead (kind "usa" or "softmax")
    t1 : float
    n_saves : int
    scheme : {"lagrangian", "fv_circle", "fv_sphere", "jko", "spectral"}
    **options
        Scheme options: ``dt``/``method`` (lagrangian, jko), ``kappa`` (fv_circle, fv_sphere, jko,
        spectral), ``cfl`` (fv_circle, fv_sphere), ``gamma`` (jko entropic blur; default τ/50),
        ``L`` (spectral band limit; None: chosen and refined to meet ``tol``, up to ``max_L``), ``tol`` (spectral
        tail tolerance, default 1e-10), ``rtol`` (spectral local step tolerance, default 1e-10).
        The spectral scheme returns ``info["solution"]`` (:class:`~meanfield.SpectralSolution`),
        ``info["tail"]`` and ``info["min_density"]`` per save time.

    Examples
    --------
    >>> from meanfield import EmpiricalMeasure
    >>> model = MultiHead(np.eye(3), beta=1.0, kind="softmax")
    >>> res = wasserstein_ascent(EmpiricalMeasure(np.eye(3)), model, t1=1.0, dt=0.1, n_saves=3)
    >>> res.points.shape
    (3, 3, 3)
    """
    check_choice(scheme, "scheme", SCHEMES, "wasserstein_ascent")
    _check_model(model)
    t0 = check_param(t0, "t0", "wasserstein_ascent")
    t1 = check_param(t1, "t1", "wasserstein_ascent")
    if t1 <= t0:
        raise InvalidParameterError(f"t1 must be greater than t0 = {t0:g}; got {t1:g}.")
    n_saves = check_param(n_saves, "n_saves", "wasserstein_ascent", low=2, integer=True)
    ts = np.linspace(t0, t1, n_saves)
    _check_options(scheme, mu0, options)
    if scheme == "lagrangian" and options.get("dt") is None and options.get("method", "rk4") != "dopri5":
        raise InvalidParameterError("scheme 'lagrangian' with a fixed-step method needs dt.")
    return SCHEMES[scheme](mu0, model, ts, **options)


#: options each scheme accepts (an unknown option is a typo: refused, not ignored)
_OPTIONS = {"lagrangian": {"dt", "method"}, "fv_circle": {"cfl", "kappa", "max_steps"},
            "fv_sphere": {"cfl", "kappa", "max_steps"}, "jko": {"dt", "gamma", "kappa"},
            "spectral": {"L", "tol", "rtol", "kappa", "max_steps", "max_L"}}


def _check_options(scheme, mu0, options):
    """Validate the scheme options of wasserstein_ascent once, at the boundary."""
    caller = "wasserstein_ascent"
    from .spectral import ZonalMeasure

    if not isinstance(mu0, (EmpiricalMeasure, GridMeasure, ZonalMeasure)):
        raise InvalidParameterError(
            f"The 'mu0' parameter of {caller} must be an EmpiricalMeasure, GridMeasure or ZonalMeasure; "
            f"got {type(mu0).__name__}."
        )
    if isinstance(mu0, ZonalMeasure) and scheme != "spectral":
        raise InvalidParameterError(f"a ZonalMeasure is solved by scheme='spectral' only; got scheme={scheme!r}.")
    unknown = set(options) - _OPTIONS[scheme]
    if unknown:
        raise InvalidParameterError(
            f"scheme {scheme!r} of {caller} takes the options {sorted(_OPTIONS[scheme])}; got unknown {sorted(unknown)}."
        )
    if "kappa" in options:
        options["kappa"] = check_param(options["kappa"], "kappa", caller, low=0.0, low_open=True, allow_inf=True)
    if "cfl" in options:
        options["cfl"] = check_param(options["cfl"], "cfl", caller, low=0.0, high=1.0, low_open=True)
    if "max_steps" in options:
        options["max_steps"] = check_param(options["max_steps"], "max_steps", caller, low=1, integer=True)
    if options.get("dt") is not None:
        options["dt"] = check_param(options["dt"], "dt", caller, low=0.0, low_open=True)
    if "method" in options:
        from particles import STEPPERS

        check_choice(options["method"], "method", STEPPERS, caller)
