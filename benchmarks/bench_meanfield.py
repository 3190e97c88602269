"""Accuracy against cost of the mean-field schemes on one problem per sphere.

Problem (both spheres): two softmax heads M_h = W_h = λ_h I, λ = (1, 0.5), β = 2, from
ρ0 ∝ exp(cos θ) on S^1 (noise κ = 10, t1 = 1) and ρ0 ∝ exp(x_3) on S^2 (no noise, t1 = 0.5,
so that Lagrangian particles solve the same equation). The reference is the spectral solution at
twice the largest band limit in the table.

Errors at t1:

- S^1: W1 (radians) between the scheme's measure and the reference, from quantile atoms
  (2^16 atoms of the grid/spectral measures; the particles themselves for ``lagrangian``, started at
  the n mid-quantiles of ρ0);
- S^2: the error of the first two moments, |E x - E_ref x| + |E xxᵀ - E_ref xxᵀ|_F (spectral and
  finite volumes integrate their density exactly on their own grid; particles start at
  Gauss–Legendre cells' centres with the cells' masses).

A second table times one S^2 right-hand side (spherical-harmonic route) at L = 64 .. 256.

A third table runs each spectral solver at several band limits on a problem that sharpens (one USA
head, β = 2, ρ0 = 1 + x_d/2, plus 0.3 x_1 on S^2 so that the start is not zonal; on S^1 two softmax
heads, β = 3, from exp(0.8 cos θ + 0.3 sin²θ)) to t1 = 1 with a fixed L (``tol=0.5``: no refinement),
and prints the error against the largest L and the largest coefficient of degree ≥ 60 (true size:
below 1e-12), which must not grow with L.

Run:  python benchmarks/bench_meanfield.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _timing import Timing, header
from threadpoolctl import threadpool_limits

import meanfield as mf
import particles
from metrics import circle_quantile_atoms, circle_wasserstein
from metrics.spectral_reference import circle_spectral_quantiles

M_ATOMS = 2**16


_TIMINGS = []  # every measurement, for the conditions printed above the tables


def timed(fn):
    t = time.perf_counter()
    out = fn()
    _TIMINGS.append(Timing.now(time.perf_counter() - t))
    return out, _TIMINGS[-1].seconds


def circle_rows(quick):
    model = particles.MultiHead.scalar([1.0, 0.5], d=2, beta=2.0, kind="softmax")
    kappa, t1 = 10.0, 1.0

    def measure(m):
        pts, areas = mf.circle_grid(m)
        return mf.GridMeasure.from_density(pts, areas, lambda x: np.exp(x[:, 0]))

    Ls = [8, 16, 32] if quick else [8, 16, 32, 64]
    ref = mf.wasserstein_ascent(measure(512), model, t1=t1, n_saves=2, scheme="spectral", L=2 * Ls[-1],
                                kappa=kappa, rtol=1e-13, tol=1e-6)
    ref_atoms, _ = circle_spectral_quantiles(ref.info["solution"], 1, M=M_ATOMS)
    rows = []
    for L in Ls:
        res, sec = timed(lambda L=L: mf.wasserstein_ascent(measure(4 * L), model, t1=t1, n_saves=2,
                                                           scheme="spectral", L=L, kappa=kappa, tol=1e-2))
        atoms, _ = circle_spectral_quantiles(res.info["solution"], 1, M=M_ATOMS)
        rows.append(("S^1", "spectral", f"L={L}", sec, circle_wasserstein(atoms, ref_atoms, p=1,
                                                                          method="circle")[0]))
    for m in ([64, 256] if quick else [64, 256, 1024]):
        res, sec = timed(lambda m=m: mf.wasserstein_ascent(measure(m), model, t1=t1, n_saves=2, scheme="fv_circle",
                                                           kappa=kappa))
        # cell k of circle_grid spans [2πk/m, 2π(k+1)/m): the quantile atoms of the piecewise-uniform measure
        atoms = circle_quantile_atoms(res.mass[-1], M_ATOMS)
        rows.append(("S^1", "fv_circle", f"m={m}", sec, circle_wasserstein(atoms, ref_atoms, p=1,
                                                                           method="circle")[0]))
    return rows


def sphere_moments(points, w):
    m1 = w @ points
    m2 = np.einsum("k,ki,kj->ij", w, points, points)
    return m1, m2


def sphere_rows(quick):
    model = particles.MultiHead.scalar([1.0, 0.5], d=3, beta=2.0, kind="softmax")
    t1 = 0.5
    fn = lambda x: np.exp(x[:, 2])  # noqa: E731

    def gl_measure(n):
        pts, w = mf.sphere_quadrature(3, n=n)
        return mf.GridMeasure.from_density(pts, 4 * np.pi * w, fn)

    Ls = [8, 16] if quick else [8, 16, 32]
    ref = mf.wasserstein_ascent(gl_measure(2 * Ls[-1] + 1), model, t1=t1, n_saves=2, scheme="spectral",
                                L=2 * Ls[-1], rtol=1e-13, tol=1e-6)
    r1, r2 = sphere_moments(ref.points, ref.mass[-1])

    def err(points, w):
        m1, m2 = sphere_moments(points, w)
        return float(np.linalg.norm(m1 - r1) + np.linalg.norm(m2 - r2))

    rows = []
    for L in Ls:
        res, sec = timed(lambda L=L: mf.wasserstein_ascent(gl_measure(L + 1), model, t1=t1, n_saves=2,
                                                           scheme="spectral", L=L, tol=1e-2))
        rows.append(("S^2", "spectral", f"L={L}", sec, err(res.points, res.mass[-1])))
    for m in ([200, 800] if quick else [200, 800, 3200]):
        pts, areas = mf.fibonacci_sphere(m)
        mu0 = mf.GridMeasure.from_density(pts, areas, fn)
        res, sec = timed(lambda mu0=mu0: mf.wasserstein_ascent(mu0, model, t1=t1, n_saves=2, scheme="fv_sphere"))
        rows.append(("S^2", "fv_sphere", f"m={m}", sec, err(pts, res.mass[-1])))
    for n in ([8, 16] if quick else [8, 16, 32]):
        mu0 = gl_measure(n)
        emp = mf.EmpiricalMeasure(mu0.points, mu0.mass)
        res, sec = timed(lambda emp=emp: mf.wasserstein_ascent(emp, model, t1=t1, n_saves=2, dt=0.01))
        rows.append(("S^2", "lagrangian", f"n={2 * n * n} atoms", sec, err(res.points[-1], res.mass[-1])))
    return rows


def sphere_rhs_rows(quick):
    """Seconds per S^2 right-hand side (spherical-harmonic route, two scalar heads), best of 5."""
    from meanfield._spectral.sphere import Sphere

    rows = []
    for kind in ("usa", "softmax"):
        model = particles.MultiHead.scalar([1.0, 0.5], d=3, beta=2.0, kind=kind)
        for L in ([64, 256] if quick else [64, 128, 256]):
            disc = Sphere(model, L)
            c = np.zeros((L + 1, L + 1), complex)
            c[0, 0], c[1, 0], c[2, 1] = 1.0, 0.1, 0.05
            disc.rhs(c)
            best = min(timed(lambda disc=disc, c=c: disc.rhs(c))[1] for _ in range(5))
            rows.append((kind, L, disc.sht.nlat, best))
    return rows


def spectral_problems():
    """(name, model, measure) of the band-limit table (module docstring)."""
    pts, areas = mf.circle_grid(512)
    s1 = mf.GridMeasure.from_density(pts, areas, lambda x: np.exp(0.8 * x[:, 0] + 0.3 * x[:, 1] ** 2))
    pts, w = mf.sphere_quadrature(3, n=40)
    s2 = mf.GridMeasure.from_density(pts, 4 * np.pi * w, lambda x: 1 + 0.5 * x[:, 2] + 0.3 * x[:, 0])
    usa = lambda d: particles.MultiHead.scalar([1.0], d=d, beta=2.0, kind="usa")  # noqa: E731
    zonal = lambda d: mf.ZonalMeasure(lambda x: 1 + 0.5 * x[:, -1], d=d)  # noqa: E731
    return [("S^1 Fourier", particles.MultiHead.scalar([1.0, 0.5], d=2, beta=3.0, kind="softmax"), s1),
            ("S^2 harmonics", usa(3), s2), ("zonal S^2", usa(3), zonal(3)), ("zonal S^7", usa(8), zonal(8))]


def spectral_band_limit_rows(quick):
    """Seconds, steps, error against the largest L and max |c_l| (l >= 60) at t1 = 1 per problem and L."""
    Ls = {"S^1 Fourier": [16, 64, 256, 1024], "S^2 harmonics": [16, 32, 64] if quick else [16, 32, 64, 128],
          "zonal S^2": [16, 64, 256, 1024], "zonal S^7": [16, 64, 256, 1024]}
    rows = []
    for name, model, mu0 in spectral_problems():
        runs = []
        for L in Ls[name]:
            res, sec = timed(lambda L=L, mu0=mu0, model=model: mf.wasserstein_ascent(
                mu0, model, t1=1.0, n_saves=2, scheme="spectral", L=L, tol=0.5))
            runs.append((L, sec, res.n_steps, res.info["solution"].coefficients[-1]))
        ref = runs[-1][3]
        for L, sec, steps, c in runs:
            err = np.abs(c - ref[tuple(slice(0, k) for k in c.shape)]).max() if L < runs[-1][0] else np.nan
            high = np.abs(c[60:]).max() if L > 60 else np.nan
            rows.append((name, L, sec, steps, err, high))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer resolutions")
    args = parser.parse_args()
    with threadpool_limits(1):
        rows = circle_rows(args.quick) + sphere_rows(args.quick)
    print(header(_TIMINGS, title="mean-field schemes, one BLAS thread, one process"))
    print()
    print("| sphere | scheme | resolution | seconds | error at t1 |")
    print("|---|---|---|---|---|")
    for sphere, scheme, res, sec, e in rows:
        print(f"| {sphere} | {scheme} | {res} | {sec:.3g} | {e:.2e} |")
    with threadpool_limits(1):
        rhs = sphere_rhs_rows(args.quick)
    print()
    print("| S^2 right-hand side | L | Gauss-Legendre latitudes | seconds |")
    print("|---|---|---|---|")
    for kind, L, nlat, sec in rhs:
        print(f"| {kind} | {L} | {nlat} | {sec:.3g} |")
    with threadpool_limits(1):
        band = spectral_band_limit_rows(args.quick)
    print()
    print("| spectral solver | L | seconds | steps | error vs largest L | max abs c_l, l >= 60 |")
    print("|---|---|---|---|---|---|")
    for name, L, sec, steps, err, high in band:
        e = "reference" if np.isnan(err) else f"{err:.1e}"
        h = "-" if np.isnan(high) else f"{high:.1e}"
        print(f"| {name} | {L} | {sec:.3g} | {steps} | {e} | {h} |")


if __name__ == "__main__":
    main()
