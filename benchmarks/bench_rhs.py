"""Seconds per right-hand-side evaluation against the GEMM + exp work it cannot avoid.

For each (n, d, H) the script times, with one BLAS thread, in the same run:

- ``ours``: ``MultiHead.velocity`` (blocked, shifted, projected);
- ``floor``: per head, the row pass's blocks doing only logits GEMM, in-place exp and the
  output GEMM (no shift, no normalisation, no projection): the work no implementation of
  softmax attention avoids;
- ``dense``: a plain reference materialising the (n, n) matrices with scipy.special.softmax.

and prints ``ours / floor`` (target <= 1.3 at n >= 1024) and ``dense / ours``. All three are
timed in this process under the same thread limits (``_timing.ratio`` refuses anything else),
and the table header gives the machine's load average and the limits.

Run:  python benchmarks/bench_rhs.py [--kind softmax] [--repeat 5]
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import best_of, header, ratio
from scipy.special import softmax
from threadpoolctl import threadpool_limits

import particles
from particles._summation.exact import ROW_ELEMENTS_FEW
from particles.extend import rows_per_block as _rows_per_block


def floor_fn(model, x):
    n, d = x.shape
    # the row pass's own tiles (at most ROW_ELEMENTS_FEW entries for d <= 16: a 2 MiB tile spills out of L2 and
    # would make the floor slower than the work it stands for)
    B = _rows_per_block(n, n, min(model.block_elements, ROW_ELEMENTS_FEW) if d <= 16 else model.block_elements)
    tile = np.empty((B, n))
    XT = np.ascontiguousarray(x.T)
    out = np.empty((n, d))

    def run():
        for h in range(model.n_heads):
            L = x @ (model.beta * model.M[h])
            for s in range(0, n, B):
                e = min(n, s + B)
                T = tile[: e - s]
                np.matmul(L[s:e], XT, out=T)
                np.exp(T, out=T)
                np.matmul(T, x, out=out[s:e])

    return run


def dense_fn(model, x):
    def run():
        v = np.zeros_like(x)
        for h in range(model.n_heads):
            A = softmax(model.beta * (x @ model.M[h] @ x.T), axis=1)
            v += A @ x @ model.W[h].T
        return particles.project_tangent(x, v)

    return run


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", default="softmax", choices=sorted(particles.KINDS))
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--sizes", default="256,1024,4096")
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    with threadpool_limits(1, user_api="blas"):
        for n in map(int, args.sizes.split(",")):
            for d in (3, 64):
                for H in (1, 8):
                    A = rng.standard_normal((H, d, d)) / np.sqrt(d)
                    M = (A + A.transpose(0, 2, 1)) / 2
                    model = particles.MultiHead(M, beta=1.0, kind=args.kind, log_time_scale="auto", summation="exact")
                    x = particles.sample_uniform(n, d=d, rng=rng)
                    ours = best_of(lambda model=model, x=x: model.velocity(x), args.repeat)
                    floor = best_of(floor_fn(model, x), args.repeat)
                    dense = (best_of(dense_fn(model, x), max(1, args.repeat // 2)) if args.kind == "softmax"
                             else None)
                    rows.append((n, d, H, ours, floor, dense))
                    dense_ratio = np.nan if dense is None else ratio(dense, ours)
                    print(f"{n:6d} {d:4d} {H:3d}  {ours.seconds * 1e3:10.3f} ms  floor {floor.seconds * 1e3:10.3f} ms  "
                          f"ours/floor {ratio(ours, floor):5.2f}  dense/ours {dense_ratio:5.2f}", flush=True)
    print()
    timings = [t for row in rows for t in row[3:] if t is not None]
    print(header(timings, title=f"kind={args.kind}, one BLAS thread, best of {args.repeat}"))
    print()
    print("|     n |  d |  H | ours (ms) | floor (ms) | ours/floor | dense/ours |")
    print("|------:|---:|---:|----------:|-----------:|-----------:|-----------:|")
    for n, d, H, ours, floor, dense in rows:
        dense_ratio = np.nan if dense is None else ratio(dense, ours)
        print(f"| {n:5d} | {d:2d} | {H:2d} | {ours.seconds * 1e3:9.3f} | {floor.seconds * 1e3:10.3f} | "
              f"{ratio(ours, floor):10.2f} | {dense_ratio:10.2f} |")


if __name__ == "__main__":
    main()
