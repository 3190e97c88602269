"""One thread against two: the fast summation, the exact pass and the S^2 transforms, in one process.

Each row times the same call under ``threadpool_limits(k)`` with ``particles.set_num_threads(k)``, k = 1
then 2 (best of ``--repeat`` after a warm-up): ``MultiHead(..., summation="fast", tol=1e-8).velocity``
on uniform tokens of S^2 (beta = 10; the NUFFT library in use is printed), the same with
``summation="exact"`` (beta = 4, one head, d = 3 and d = 64; the thread pool over row blocks), and
one analysis + synthesis pair of ``meanfield.sphere_harmonic_transform`` at L = 1024. The speed-up
divides the two timings of one row: same process, thread limits as stated in the row.

A second table gives the machine's own two-thread ceiling for the kernels the exact pass is made of: each
of two Python threads loops over one kernel on arrays of its own (one BLAS thread; the GEMMs and ``np.exp``
release the GIL, and no Python work runs between the calls), against one thread doing the same loop. The
kernels are those of one 384 x 384 tile of the symmetric pass at d = 3 (the logits GEMM, the exp, the two
sums GEMMs) and the whole tile; a pass of tiles cannot scale better than its tile does here.

Run:  python benchmarks/bench_threads.py [--quick] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from _timing import Timing, best_of, header, ratio
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
        x = sample_uniform(n, d=3, rng=rng)
        m = MultiHead.scalar([1.0], d=3, beta=10.0, kind="softmax", summation="fast", tol=1e-8)
        out.append((f"fast, {nufft_library()}, S^2, n = {n}", lambda m=m, x=x: m.velocity(x)))
    for n, d in ([(4096, 3)] if quick else [(4096, 3), (8192, 3), (4096, 64)]):
        x = sample_uniform(n, d=d, rng=rng)
        m = MultiHead.scalar([1.0], d=d, beta=4.0, kind="softmax", summation="exact")
        out.append((f"exact, d = {d}, n = {n}", lambda m=m, x=x: m.velocity(x)))
    L = 512 if quick else 1024
    nlat = L + 2 + math.ceil((L + 2) / 2)
    sht = mf.sphere_harmonic_transform(L, nlat)
    C = np.tril(rng.standard_normal((L + 1, L + 1)) + 1j * rng.standard_normal((L + 1, L + 1)))
    out.append((f"S^2 transforms ({sht.backend}), pair at L = {L}", lambda: sht.analysis(sht.synthesis(C))))
    return out


def _tile_kernels(side=384, d=3):
    """name -> one call on arrays of its own (a fresh set per thread): one tile of the symmetric exact pass."""
    def make(seed):
        r = np.random.default_rng(seed)
        La, YaT = r.standard_normal((side, d + 1)) * 0.5, r.standard_normal((d + 1, side)) * 0.5
        Ya, T, out = np.ascontiguousarray(YaT.T), np.empty((side, side)), np.zeros((side, d + 1))
        logits = np.matmul(La, YaT)

        def tile():
            np.matmul(La, YaT, out=T)
            np.exp(T, out=T)
            out[:] += T @ Ya
            out[:] += T.T @ Ya

        return {"logits GEMM (384 x 4 by 4 x 384)": lambda: np.matmul(La, YaT, out=T),
                "exp of the tile": lambda: np.exp(logits, out=T),
                "sums GEMM (tile by 384 x 4)": lambda: np.matmul(logits, Ya),
                "transposed sums GEMM": lambda: np.matmul(logits.T, Ya),
                "whole tile (GEMM, exp, two GEMMs)": tile}
    return make


def _threads_loop(make, name, k, seconds=0.3):
    """Calls of ``name`` per second summed over k threads, each looping on arrays of its own."""
    import threading

    fns = [make(seed)[name] for seed in range(k)]
    for fn in fns:
        fn()
    reps = max(20, int(seconds / best_of(fns[0], 3).seconds))
    threads = [threading.Thread(target=lambda fn=fn: [fn() for _ in range(reps)]) for fn in fns]
    with threadpool_limits(1):
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        return Timing.now((time.perf_counter() - t) / (k * reps))


def kernel_ceiling():
    """The table of the machine's two-thread scaling of the exact pass's kernels (module docstring)."""
    make, timings = _tile_kernels(), []
    print("| kernel (exact pass, d = 3) | 1 thread (us per call) | 2 threads (us per call and thread) "
          "| speed-up |\n|---|---:|---:|---:|")
    for name in make(0):
        one, two = _threads_loop(make, name, 1), _threads_loop(make, name, 2)
        timings += [one, two]
        print(f"| {name} | {one.seconds * 1e6:.1f} | {two.seconds * 1e6:.1f} | {ratio(one, two):.2f}x |", flush=True)
    return timings


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kernels", action="store_true", help="only the kernels' two-thread ceiling table")
    args = ap.parse_args()
    timings = []
    if args.kernels:
        print(header(kernel_ceiling(), title="two Python threads against one, each looping on one kernel"))
        return
    print("| pass | 1 thread (s) | 2 threads (s) | speed-up |\n|---|---:|---:|---:|")
    for name, fn in rows(args.quick):
        one, two = _time(fn, 1, args.repeat), _time(fn, 2, args.repeat)
        timings += [one, two]
        print(f"| {name} | {one.seconds:.3f} | {two.seconds:.3f} | {one.seconds / two.seconds:.2f}x |", flush=True)
    print()
    timings += kernel_ceiling()
    print()
    print(header(timings, title="one thread against two (each row: same process, threadpool_limits(k) and "
                                "particles.set_num_threads(k))"))


if __name__ == "__main__":
    main()
