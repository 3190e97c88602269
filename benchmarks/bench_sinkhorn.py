"""Sinkhorn divergence at limit-study sizes: plain log-domain Sinkhorn (ω = 1) against the
over-relaxed updates metrics.sinkhorn_divergence uses (ω = 1.8), both with ε-scaling.

Prints a markdown table: sizes, reg, seconds and iterations of the cross term for each ω, the
speed-up, and the difference of the two values (they solve the same problem to tol).

Run:  OMP_NUM_THREADS=1 python benchmarks/bench_sinkhorn.py [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _timing import Timing, header, ratio
from threadpoolctl import threadpool_limits

import particles
from metrics._observables import transport


def _cross_term(x, y, reg, tol, omega):
    a = np.full(len(x), 1 / len(x))
    b = np.full(len(y), 1 / len(y))
    C = transport._cost(x, y, 2)
    t0 = time.perf_counter()
    value, err = transport._entropic_dual(a, b, C, reg, 100_000, tol, omega=omega)
    return value, err, Timing.now(time.perf_counter() - t0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (seconds)")
    args = parser.parse_args(argv)
    sizes = [(200, 400)] if args.quick else [(200, 400), (500, 1000), (1000, 2000)]
    rng = np.random.default_rng(0)
    rows = []
    with threadpool_limits(1):
        for n, m in sizes:
            x = particles.sample_uniform(n, d=3, rng=rng)
            y = particles.sample_uniform(m, d=3, rng=rng)
            for reg in (0.05, 0.2):
                v1, _, t1 = _cross_term(x, y, reg, 1e-9, 1.0)
                v2, _, t2 = _cross_term(x, y, reg, 1e-9, 1.8)
                rows.append((n, m, reg, t1, t2, abs(v1 - v2)))
    print(header([t for row in rows for t in row[3:5]], title="Sinkhorn cross term, one BLAS thread, one process"))
    print()
    print("| n | m | reg | tol | plain (s) | over-relaxed (s) | speed-up | |value difference| |")
    print("|---|---|---|---|---|---|---|---|")
    for n, m, reg, t1, t2, diff in rows:
        print(f"| {n} | {m} | {reg:g} | 1e-9 | {t1.seconds:.2f} | {t2.seconds:.2f} | {ratio(t1, t2):.1f} | "
              f"{diff:.1e} |")


if __name__ == "__main__":
    main()
