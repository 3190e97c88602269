r"""Finite-volume schemes: ``fv_circle`` (uniform grid in angle on S^1) and ``fv_sphere``
(spherical Voronoi cells on S^2); upwind fluxes, SSP-RK2 (Heun) under a CFL step in the
particle solve loop, mass exact and masses non-negative (module docstring of
:mod:`meanfield.flow`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from particles import MultiHead, SaveAt, geodesic_distance, simulate
from particles.extend import CFLController, SchemeState, scalar_heads
from particles.validation import InvalidParameterError

from ._result import MeanFieldResult
from ._spectral.shared import usa_scale
from .field import measure_energy, measure_velocity
from .measure import GridMeasure

__all__ = ["circle_velocity", "SphereMesh"]


def circle_velocity(model: MultiHead, mass: np.ndarray) -> np.ndarray:
    r"""Tangential velocity :math:`v[\mu](\theta_{k+1/2})` at the cell faces of the uniform
    S^1 grid (cells centred at :math:`\theta_k = (k + 1/2)\Delta`, faces at :math:`(k+1)\Delta`).

    Scalar heads: :math:`v_f = \sum_h \mu_h
    \frac{\sum_k g_h(\theta_f-\theta_k) p_k}{[\sum_k e^{a_h\cos(\theta_f-\theta_k)}p_k]}`
    with :math:`g(\delta) = -e^{a\cos\delta}\sin\delta`, :math:`a = \beta\lambda_h` (the bracket
    for softmax only), both circular convolutions done by FFT in O(m log m).
    """
    m = mass.size
    delta = 2 * np.pi / m
    sc = scalar_heads(model.M, model.W)
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
        if model.attention.normalised:  # (softmax's rule; else USA's, scaled by e^{|a| - c})
            den = np.fft.irfft(np.fft.rfft(ker) * P, n=m)
            v += mh * num / den
        else:
            v += mh * usa_scale(model, a) * num
    return v


class _MassField(SchemeState):
    """A finite-volume right-hand side ``rhs(p) -> (dp/dt, rate)`` as a field of the particle
    solve loop: the state is the column of cell masses (flat geometry), and ``rate`` the CFL
    rate of :class:`~particles._dynamics.controllers.CFLController`. The last evaluation is kept,
    so the rate the controller asks for and the stepper's first stage cost one evaluation."""

    def __init__(self, rhs):
        self._rhs = rhs
        self._last = (None, None, None)

    def _eval(self, p):
        if self._last[0] is not p:
            L, rate = self._rhs(p[:, 0])
            self._last = (p, L[:, None], rate)
        return self._last[1:]

    def __call__(self, t, p):
        return self._eval(p)[0]

    def rate(self, p):
        return self._eval(p)[1]


def _ssp_rk2(rhs, p, ts, cfl, max_steps, **run):
    """Heun (SSP-RK2) from masses p over the save times, in the particle solve loop with a CFL
    step: dt · rate ≤ cfl keeps each forward-Euler stage, hence the whole step, non-negative."""
    field = _MassField(rhs)
    traj = simulate(p[:, None], field, t0=float(ts[0]), t1=float(ts[-1]), method="heun", save=SaveAt(ts=ts),
                    controller=CFLController(cfl, field.rate), max_steps=max_steps, **run)
    return traj.x[..., 0], traj


def _fv_rhs(model, p, D, delta):
    v = circle_velocity(model, p)  # face f sits between cells f and f+1
    flux = np.maximum(v, 0) * p + np.minimum(v, 0) * np.roll(p, -1)
    if D > 0:
        flux -= D * (np.roll(p, -1) - p) / delta
    flux /= delta
    # positivity of forward Euler: dt (max|v|/Δ + 2D/Δ²) ≤ 1
    return -(flux - np.roll(flux, 1)), float(np.abs(v).max()) / delta + 2 * D / delta**2


def _route(mu0) -> str:
    """The schemes that solve ``mu0``, for the refusal of a scheme that does not."""
    if not isinstance(mu0, GridMeasure):
        return f"mu0 = {mu0!r}: use scheme='lagrangian' (weighted atoms)"
    d = mu0.points.shape[1]
    fits = {2: "scheme='fv_circle' (on circle_grid(m)), 'spectral' or 'jko'",
            3: "scheme='fv_sphere', 'jko' or 'spectral' (on sphere_quadrature(3, n=n))"}.get(d, "scheme='jko'")
    return f"mu0 is a GridMeasure on S^{d - 1} (d = {d}): use {fits}"


def fv_circle(mu0, model, ts, *, cfl=0.45, kappa=np.inf, max_steps=10_000_000, **run):
    """The ``"fv_circle"`` scheme of :func:`~meanfield.wasserstein_ascent` (:mod:`meanfield.flow`)."""
    if not isinstance(mu0, GridMeasure) or mu0.points.shape[1] != 2:
        raise InvalidParameterError("scheme 'fv_circle' needs a GridMeasure on the uniform S^1 grid (circle_grid); "
                                    f"{_route(mu0)}.")
    m = len(mu0.mass)
    delta = 2 * np.pi / m
    expected = np.stack([np.cos((np.arange(m) + 0.5) * delta), np.sin((np.arange(m) + 0.5) * delta)], 1)
    if not np.allclose(mu0.points, expected, atol=1e-12):
        raise InvalidParameterError("scheme 'fv_circle' needs the points of meanfield.circle_grid(m).")
    D = 0.0 if not np.isfinite(kappa) else 1.0 / kappa
    masses, traj = _ssp_rk2(lambda p: _fv_rhs(model, p, D, delta), mu0.mass.copy(), ts, cfl, max_steps, **run)
    energy = np.array([measure_energy(model, mu0.points, q / q.sum()) for q in masses])
    return MeanFieldResult(traj.t, mu0.points, masses, energy, "fv_circle", traj.n_steps,
                           {"min_mass": float(masses.min()), "mass_error": float(np.abs(masses.sum(1) - 1).max())},
                           status=traj.status, message=traj.message)


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


def fv_sphere(mu0, model, ts, *, cfl=0.45, kappa=np.inf, max_steps=10_000_000, **run):
    """The ``"fv_sphere"`` scheme of :func:`~meanfield.wasserstein_ascent` (:mod:`meanfield.flow`)."""
    if not isinstance(mu0, GridMeasure) or mu0.points.shape[1] != 3:
        raise InvalidParameterError("scheme 'fv_sphere' needs a GridMeasure on S^2 (e.g. fibonacci_sphere points); "
                                    f"{_route(mu0)}.")
    mesh = SphereMesh.from_points(mu0.points)
    D = 0.0 if not np.isfinite(kappa) else 1.0 / kappa
    masses, traj = _ssp_rk2(lambda p: _fv_sphere_rhs(model, mesh, p, D), mu0.mass.copy(), ts, cfl, max_steps, **run)
    energy = np.array([measure_energy(model, mu0.points, q / q.sum()) for q in masses])
    return MeanFieldResult(traj.t, mu0.points, masses, energy, "fv_sphere", traj.n_steps,
                           {"min_mass": float(masses.min()), "mass_error": float(np.abs(masses.sum(1) - 1).max()),
                            "n_edges": len(mesh.edges)}, status=traj.status, message=traj.message)


