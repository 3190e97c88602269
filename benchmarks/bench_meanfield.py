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
from metrics.limit import circle_quantile_atoms, circle_wasserstein
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
    ref_atoms, _ = circle_spectral_quantiles(ref.info["solution"], 1, M_ATOMS)
    rows = []
    for L in Ls:
        res, sec = timed(lambda L=L: mf.wasserstein_ascent(measure(4 * L), model, t1=t1, n_saves=2,
                                                           scheme="spectral", L=L, kappa=kappa, tol=1e-2))
        atoms, _ = circle_spectral_quantiles(res.info["solution"], 1, M_ATOMS)
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
        pts, w = mf.sphere_quadrature(3, n)
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
    from meanfield.spectral import _Sphere

    rows = []
    for kind in ("usa", "softmax"):
        model = particles.MultiHead.scalar([1.0, 0.5], d=3, beta=2.0, kind=kind)
        for L in ([64, 256] if quick else [64, 128, 256]):
            disc = _Sphere(model, L)
            c = np.zeros((L + 1, L + 1), complex)
            c[0, 0], c[1, 0], c[2, 1] = 1.0, 0.1, 0.05
            disc.rhs(c)
            best = min(timed(lambda disc=disc, c=c: disc.rhs(c))[1] for _ in range(5))
            rows.append((kind, L, disc.sht.nlat, best))
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


if __name__ == "__main__":
    main()
