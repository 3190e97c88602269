"""Phase-diagram workload: 2048 systems x n=32 x d=2 over 90 beta values to T=30.

Softmax attention with Q = K = V = I on the circle; the statistic is the mean number of
clusters at T = 30 per beta (geodesic eps = 1e-3). Three measurements, in one run:

1. ``anchor``: the anchors' scheme, a plain numpy loop over systems, projected Euler with
   dt = 0.1, dense softmax per system. Timed on a subset and extrapolated to the workload.
1b. ``batched anchor``: the same scheme as the public research scripts run it, every system
   of one beta in one batched matmul (S, n, n), one BLAS thread; timed on every system of
   every ``--batched-stride``-th beta and extrapolated to the 90 betas.
2. ``ours``: ``particles.Ensemble`` (all systems of a chunk at once) with RK4, dt = 1.0, timed
   in this process on the same systems as the batched anchor and extrapolated the same way,
   then run over the full workload in a process pool of ``--workers`` processes (one BLAS
   thread each; its wall time is reported, but no speed-up: the anchors never ran in a pool).
3. accuracy on a subset: both schemes against a converged RK4 (dt = 0.05) reference: the
   largest gap of the per-beta mean cluster count and the fraction of systems whose count differs.
4. the exponential floor: exps per second of ours per core (4 T / dt velocity evaluations of
   S n² exps each) against a plain vectorised ``np.exp`` over arrays of the same size as one
   evaluation chunk, timed in the same process under the same one-thread limit.

Every speed-up is a ratio of two timings of this process under the same thread limits
(``_timing.ratio``); the table header gives the load average and the limits.

Run:  python benchmarks/bench_phase_diagram.py [--quick] [--workers 2]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from _timing import Timing, header, ratio
from threadpoolctl import threadpool_limits

import particles
from metrics import n_clusters_batch

T_FINAL, N, EPS = 30.0, 32, 1e-3


def initial(S, seed):
    th = np.random.default_rng(seed).uniform(0, 2 * np.pi, (S, N))
    return np.stack([np.cos(th), np.sin(th)], -1)


def anchor_one(x, beta, dt=0.1):
    """The anchors' scheme for one system: projected Euler, dense softmax (a stack of one)."""
    return anchor_batched(x[None], beta, dt)[0]


def anchor_batched(x, beta, dt=0.1):
    """The anchors' scheme, projected Euler with dense softmax, for all systems of one beta
    at once: x of shape (S, n, d), one batched matmul per step."""
    for _ in range(int(round(T_FINAL / dt))):
        s = beta * (x @ x.transpose(0, 2, 1))
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        v = p @ x
        v -= np.sum(v * x, axis=-1, keepdims=True) * x
        x = x + dt * v
        x /= np.linalg.norm(x, axis=-1, keepdims=True)
    return x


def ours_chunk(args):
    x0, betas, method, dt = args
    with threadpool_limits(1, user_api="blas"):
        ens = particles.Ensemble(np.eye(2), beta=betas, chunk=256)
        traj = particles.simulate(x0, ens, t1=T_FINAL, dt=dt, method=method, save=particles.SaveAt(t0=False))
        return n_clusters_batch(traj.x[-1], eps=EPS)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a 1/16 workload (for a smoke run)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batched-stride", type=int, default=10, help="time the batched anchor on every k-th beta")
    ap.add_argument("--per-beta", type=int, default=None, help="systems per beta (default 2048; --quick: 128)")
    args = ap.parse_args(argv)
    n_beta, per_beta = (90, 128) if args.quick else (90, 2048)
    if args.per_beta is not None:
        per_beta = args.per_beta
    betas = np.linspace(0.1, 9.0, n_beta)
    S = n_beta * per_beta

    # 1. anchor timing on a subset, extrapolated
    sub = 60
    xs = initial(sub, 1)
    with threadpool_limits(1, user_api="blas"):
        t = time.perf_counter()
        for k in range(sub):
            anchor_one(xs[k], betas[k % n_beta])
        anchor = Timing.now(time.perf_counter() - t).scaled(S / sub, f"x {S}/{sub} systems")

    # 1b. batched anchor: all systems of a beta in one batched matmul, as the research scripts do
    timed = betas[:: args.batched_stride]
    with threadpool_limits(1, user_api="blas"):
        t = time.perf_counter()
        for k, b in enumerate(timed):
            anchor_batched(initial(per_beta, 100 + k), b)
        batched = Timing.now(time.perf_counter() - t).scaled(n_beta / len(timed), f"x {n_beta}/{len(timed)} betas")

    # 2a. ours on the same systems, in this process, extrapolated the same way
    with threadpool_limits(1, user_api="blas"):
        t = time.perf_counter()
        for k, b in enumerate(timed):
            ours_chunk((initial(per_beta, 100 + k), np.full(per_beta, b), "rk4", 1.0))
        ours_here = Timing.now(time.perf_counter() - t).scaled(n_beta / len(timed), f"x {n_beta}/{len(timed)} betas")

    # 3. accuracy on a subset (before the long run, so a killed run still reports it)
    acc_beta = betas[::6]
    per = 24
    xa = initial(len(acc_beta) * per, 2)
    ba = np.repeat(acc_beta, per)
    ref = ours_chunk((xa, ba, "rk4", 0.05)).reshape(len(acc_beta), per)
    fast = ours_chunk((xa, ba, "rk4", 1.0)).reshape(len(acc_beta), per)
    with threadpool_limits(1, user_api="blas"):
        anc = np.array([n_clusters_batch(anchor_one(x, b)[None], eps=EPS)[0] for x, b in zip(xa, ba)]).reshape(len(acc_beta), per)

    # 2. ours, full workload
    x0 = initial(S, 0)
    bb = np.repeat(betas, per_beta)
    chunks = np.array_split(np.arange(S), 8 * args.workers)
    t = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        counts = np.concatenate(list(pool.map(ours_chunk, [(x0[c], bb[c], "rk4", 1.0) for c in chunks])))
    ours_total = time.perf_counter() - t
    stat = counts.reshape(n_beta, per_beta).mean(axis=1)

    print(header([anchor, batched, ours_here], title=f"workload: {per_beta} systems x n={N} x d=2 x {n_beta} beta "
                                                      f"values, T={T_FINAL:g} ({S} systems)"))
    print()
    print("| scheme | time (s) | speed-up | max gap of mean clusters vs converged | systems differing |")
    print("|---|---:|---:|---:|---:|")
    print(f"| anchors' projected Euler dt=0.1, 1 thread (extrapolated from {sub} systems) | {anchor.seconds:.0f} | 1.0 | "
          f"{np.abs(anc.mean(1) - ref.mean(1)).max():.4f} | {(anc != ref).mean():.4f} |")
    print(f"| anchors' scheme batched per beta, 1 thread (extrapolated from {len(timed)} betas) | {batched.seconds:.0f} | "
          f"{ratio(anchor, batched):.1f} | same scheme as above | same |")
    print(f"| Ensemble + RK4 dt=1.0, 1 thread (extrapolated from the same {len(timed)} betas) | {ours_here.seconds:.0f} | "
          f"{ratio(anchor, ours_here):.1f} | {np.abs(fast.mean(1) - ref.mean(1)).max():.4f} | {(fast != ref).mean():.4f} |")
    print(f"speed-up of ours against the batched anchor, both in this process on one thread: "
          f"{ratio(batched, ours_here):.1f}x")
    print(f"full workload with Ensemble + RK4 dt=1.0 on {args.workers} processes: {ours_total:.0f} s wall "
          "(a pool, not comparable with the single-process timings above: no speed-up)")
    # 4. exps/s per core against a plain vectorised np.exp over the same number of entries
    n_exps = 4 * round(T_FINAL / 1.0) * S * N * N
    ours_rate = n_exps / ours_here.seconds  # one thread, this process
    block = np.random.default_rng(3).uniform(-10.0, 0.0, 256 * N * N)  # one chunk of 256 systems
    with threadpool_limits(1, user_api="blas"):
        reps = max(1, n_exps // (16 * block.size))
        t = time.perf_counter()
        for _ in range(reps):
            np.exp(block)
        plain_rate = reps * block.size / (time.perf_counter() - t)
    print(f"exps/s per core: ours {ours_rate:.3g}, plain np.exp {plain_rate:.3g} "
          f"(ours is {plain_rate / ours_rate:.1f}x from the exp floor; same process, one thread each)")
    print(f"accuracy subset: {len(acc_beta)} beta values x {per} systems; standard error of a mean "
          f"count ~ {ref.std(axis=1).max() / np.sqrt(per):.3f}")
    print("beta:           ", " ".join(f"{b:5.2f}" for b in betas[::10]))
    print("mean clusters:  ", " ".join(f"{s:5.2f}" for s in stat[::10]))


if __name__ == "__main__":
    main()
