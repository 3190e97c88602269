"""One thread against two: the fast summation, the exact pass and the S^2 transforms, in one process.

Each row times the same call under ``threadpool_limits(k)`` with ``particles.set_num_threads(k)``, k = 1
then 2 (best of ``--repeat`` after a warm-up): ``MultiHead(..., summation="fast", tol=1e-8).velocity``
on uniform tokens of S^2 (beta = 10; the NUFFT library in use is printed), the same with
``summation="exact"`` (beta = 4, one head, d = 3 and d = 64; the thread pool over row blocks), and
one analysis + synthesis pair of ``meanfield.sphere_harmonic_transform`` at L = 1024. The speed-up
divides the two timings of one row: same process, thread limits as stated in the row.

Run:  python benchmarks/bench_threads.py [--quick] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from _timing import best_of, header
from threadpoolctl import threadpool_limits

import meanfield as mf
import particles
from particles import MultiHead, sample_uniform
from particles._summation.routes import nufft_library


def _time(fn, k, repeat):
    with threadpool_limits(k):
        particles.set_num_threads(k)
        try:
            return best_of(fn, repeat)
        finally:
            particles.set_num_threads(None)


def rows(quick):
    rng = np.random.default_rng(0)
    out = []
    for n in ([100_000] if quick else [100_000, 1_000_000]):
        x = sample_uniform(n, 3, rng)
        m = MultiHead.scalar([1.0], d=3, beta=10.0, kind="softmax", summation="fast", tol=1e-8)
        out.append((f"fast, {nufft_library()}, S^2, n = {n}", lambda m=m, x=x: m.velocity(x)))
    for n, d in ([(4096, 3)] if quick else [(4096, 3), (8192, 3), (4096, 64)]):
        x = sample_uniform(n, d, rng)
        m = MultiHead.scalar([1.0], d=d, beta=4.0, kind="softmax", summation="exact")
        out.append((f"exact, d = {d}, n = {n}", lambda m=m, x=x: m.velocity(x)))
    L = 512 if quick else 1024
    nlat = L + 2 + math.ceil((L + 2) / 2)
    sht = mf.sphere_harmonic_transform(L, nlat)
    C = np.tril(rng.standard_normal((L + 1, L + 1)) + 1j * rng.standard_normal((L + 1, L + 1)))
    out.append((f"S^2 transforms ({sht.backend}), pair at L = {L}", lambda: sht.analysis(sht.synthesis(C))))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    timings = []
    print("| pass | 1 thread (s) | 2 threads (s) | speed-up |\n|---|---:|---:|---:|")
    for name, fn in rows(args.quick):
        one, two = _time(fn, 1, args.repeat), _time(fn, 2, args.repeat)
        timings += [one, two]
        print(f"| {name} | {one.seconds:.3f} | {two.seconds:.3f} | {one.seconds / two.seconds:.2f}x |", flush=True)
    print()
    print(header(timings, title="one thread against two (each row: same process, threadpool_limits(k) and "
                                "particles.set_num_threads(k))"))


if __name__ == "__main__":
    main()
