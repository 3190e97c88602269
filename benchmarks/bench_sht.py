"""Spherical-harmonic transforms and the S^2 spectral solver: ducc0 against the Legendre tables.

In one process, one thread (``--threads 2`` adds a two-thread column for ducc0):

1. accuracy at L = 64, 128, 256: synthesis of random coefficients by both backends (max difference
   relative to max|f|) and each backend's round trip (analysis of its synthesis, max coefficient error);
2. one analysis + synthesis pair on the solver's grid (nlat = L + 2 + ceil((L + 2)/2), nlon = 2 nlat)
   at L = 128 .. 2048 (the tables up to ``--tables-max``; their build is timed apart), and the memory
   each holds (the tables' arrays; ducc0 keeps no tables: the grid of one field);
3. the S^2 solver on a zonal problem (one USA head, beta = 2, rho0 = 1 + x_3/2, tol 1e-10, max_L = 1024,
   run until it refuses) against the zonal solver on the same problem: the time each reaches and the
   seconds, both in this process.

``shtns`` was also tried: it has no wheel on PyPI and its source build needs the FFTW3 library
(``configure: error: "FFTW3 library required"`` on this machine), so it is not an option for a
pip-installed package.

Run:  python benchmarks/bench_sht.py [--quick] [--threads 2] [--tables-max 256]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from _timing import Timing, best_of, header
from threadpoolctl import threadpool_limits

import meanfield as mf
import particles
from particles import MultiHead
from particles.validation import SolverError


def _grid(L):
    return L + 2 + math.ceil((L + 2) / 2)


def _coefficients(L, seed=0):
    rng = np.random.default_rng(seed)
    C = np.tril(rng.standard_normal((L + 1, L + 1)) + 1j * rng.standard_normal((L + 1, L + 1)))
    C[:, 0] = C[:, 0].real
    return C


def accuracy_table(Ls):
    print("| L | synthesis: ducc0 vs tables (rel. max) | round trip ducc0 | round trip tables |")
    print("|---:|---:|---:|---:|")
    for L in Ls:
        fast, ref = (mf.sphere_harmonic_transform(L, _grid(L), backend=b) for b in ("ducc0", "tables"))
        C = _coefficients(L)
        f, g = fast.synthesis(C), ref.synthesis(C)
        print(f"| {L} | {np.abs(f - g).max() / np.abs(g).max():.1e} | {np.abs(fast.analysis(f) - C).max():.1e} | "
              f"{np.abs(ref.analysis(g) - C).max():.1e} |")


def timing_table(Ls, tables_max, threads, repeat):
    timings = []
    cols = " | ".join(f"ducc0 {k} thr. (s)" for k in threads)
    print(f"| L | nlat x nlon | {cols} | tables build (s) | tables pair (s) | tables memory (MiB) | "
          "one field (MiB) |")
    print("|---:|---|" + "---:|" * (len(threads) + 4))
    for L in Ls:
        nlat = _grid(L)
        C = _coefficients(L)
        row = []
        for k in threads:
            with threadpool_limits(k):
                particles.set_num_threads(k)
                sht = mf.sphere_harmonic_transform(L, nlat, backend="ducc0")
                t = best_of(lambda: sht.analysis(sht.synthesis(C)), repeat)  # noqa: B023
                timings.append(t)
                row.append(f"{t.seconds:.3f}")
        particles.set_num_threads(1)
        build = pair = mem = "-"
        if L <= tables_max:
            t0 = time.perf_counter()
            tab = mf.sphere_harmonic_transform(L, nlat, backend="tables")
            build = f"{time.perf_counter() - t0:.2f}"
            t = best_of(lambda: tab.analysis(tab.synthesis(C)), repeat)  # noqa: B023
            timings.append(t)
            pair = f"{t.seconds:.3f}"
            mem = f"{sum(P.nbytes for P in tab._impl.Pe + tab._impl.Po) / 2**20:.0f}"
            del tab
        print(f"| {L} | {nlat} x {2 * nlat} | {' | '.join(row)} | {build} | {pair} | {mem} | "
              f"{nlat * 2 * nlat * 8 / 2**20:.1f} |")
    return timings


def zonal_table(max_L):
    model = MultiHead.scalar([1.0], d=3, beta=2.0, kind="usa")
    pts, w = mf.sphere_quadrature(3, n=40)
    problems = [("zonal solver (Gegenbauer)", mf.ZonalMeasure(lambda x: 1 + 0.5 * x[:, -1], d=3)),
                ("S^2 solver (harmonics)", mf.GridMeasure.from_density(pts, 4 * np.pi * w,
                                                                       lambda x: 1 + 0.5 * x[:, -1]))]
    timings = []
    print(f"\nzonal problem: one USA head, beta = 2, rho0 = 1 + x_3/2, tol 1e-10, max_L = {max_L}, run to t = 3 "
          "or the refusal")
    print("| solver | reached t | L at the end | seconds |")
    print("|---|---:|---:|---:|")
    for name, mu in problems:
        t0 = time.perf_counter()
        try:
            res = mf.wasserstein_ascent(mu, model, t1=3.0, n_saves=31, scheme="spectral", max_L=max_L)
            reach, L = "3 (end)", res.info["L"]
        except SolverError as exc:
            msg = str(exc)
            reach, L = msg.split("at t=")[1].split()[0], max_L
        t = Timing.now(time.perf_counter() - t0)
        timings.append(t)
        print(f"| {name} | {reach} | {L} | {t.seconds:.2f} |")
    print(f"S^2 / zonal time: {timings[1].seconds / timings[0].seconds:.2f}x (same process, one thread)")
    return timings


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", default="1", help="comma-separated thread counts for ducc0 (e.g. 1,2)")
    ap.add_argument("--tables-max", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    threads = [int(k) for k in args.threads.split(",")]
    Ls = [128, 256, 512] if args.quick else [128, 256, 512, 1024, 2048]
    with threadpool_limits(1):
        particles.set_num_threads(1)
        print("## spherical-harmonic transforms: accuracy (ducc0 against the Legendre tables)\n")
        accuracy_table([64, 128] if args.quick else [64, 128, 256])
    print("\n## one analysis + synthesis pair\n")
    timings = timing_table(Ls, args.tables_max, threads, args.repeat)
    with threadpool_limits(1):
        particles.set_num_threads(1)
        timings += zonal_table(256 if args.quick else 1024)
    print()
    print(header(timings, title="S^2 transforms and solvers"))


if __name__ == "__main__":
    main()
