"""Phase-diagram workload: 2048 systems x n=32 x d (2 or 128) over 90 beta values to T=30.

Softmax attention with Q = K = V = I on S^{d-1} (``--d``, default 2: the circle), or several scalar heads
M_h = W_h = lambda_h I (``--lambdas 0.5,1,2 --d 16``: the three-head workload of issue 58,
v_i = P_{x_i} sum_h lambda_h sum_j softmax_j(beta lambda_h <x_i, x_j>) x_j); the statistic
is the mean number of clusters at T = 30 per beta (geodesic eps = 1e-3). Measurements, in one run:

1. ``anchor``: the anchors' scheme, a plain numpy loop over systems, projected Euler with
   dt = 0.1, dense softmax per system (per head, summed). Timed on a subset and extrapolated to the workload.
1b. ``batched anchor``: the same scheme as the public research scripts run it, every system
   of one beta in one batched matmul (S, n, n), one BLAS thread; timed on every system of
   every ``--batched-stride``-th beta and extrapolated to the 90 betas (per beta the best of ``--rounds``
   calls, interleaved with ours on the same systems; both sides count the clusters at T).
2. ``ours``: the path of ``metrics.phase_diagram``: ``particles.Ensemble`` (all systems of a chunk
   at once) with RK4, dt = ``--dt`` (1.0), integrated by ``particles.simulate`` on the field
   ``Ensemble.settling(eps)``, which
   lets a system leave once its tokens lie in a forward-invariant cap of diameter < eps (its
   count at T is then 1; ``--no-settle`` integrates every system to T); for d > n the tokens are
   first written in an orthonormal basis of their span (QR: M = W = I keeps the span, and the
   Gram matrix, hence the count, is unchanged), as ``metrics.phase_diagram`` does. Several scalar heads run
   the shared pass of ``particles/_model/ensemble_shared.py``: one Gram GEMM and one exp per evaluation (the
   heads of strength 1 and 2 take E^2 = E E and E^4 = E^2 E^2 of the head of strength 0.5), the heads combined
   before one sums GEMM and one tangent projection. Timed in this
   process on the same systems (the same initial tokens) as the batched anchor and extrapolated
   the same way, then run over the full workload in a process pool of ``--workers`` processes
   (one BLAS thread each; its wall time is reported, but no speed-up: the anchors never ran in a pool).
3. accuracy on a subset (``--accuracy-per`` systems at every ``--accuracy-stride``-th beta; 24 and 6 by default,
   32 and 1 for the published three-head comparison of RK4 and Heun): both schemes against a converged RK4
   (dt = 0.05) reference: the largest gap of the per-beta mean cluster count and the systems whose count differs.
4. the exponential floor: exps per second of ours per core (4 T / dt velocity evaluations of
   S n² exps per head each: the dense count) against a plain vectorised ``np.exp`` over arrays of the same
   size as one evaluation chunk, timed in the same process under the same one-thread limit; next to it the
   exps ours actually computed (``Ensemble.exps_per_evaluation``: n² per running system, evaluation and exp
   of the pass, one for the three heads of the shared pass; settled systems stop).

Every speed-up is a ratio of two timings of this process under the same thread limits
(``_timing.ratio``); the table header gives the load average and the limits.

Run:  python benchmarks/bench_phase_diagram.py [--quick] [--workers 2] [--d 128] [--dt 1.0] [--method rk4] [--no-settle]
      python benchmarks/bench_phase_diagram.py --quick --lambdas 0.5,1,2 --d 16 --dt 0.3 --merge 1e-6   (three heads:
      their total strength 3.5 sets the time scale, so ours steps at 0.3, not 1; the anchor keeps dt = 0.1;
      ``--method heun`` takes two evaluations per step instead of four: benchmarks/README.md compares the two)
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
from particles._model.ensemble_kernels import L2_LOGITS

T_FINAL, N, EPS = 30.0, 32, 1e-3
_LIMIT = None  # a pool worker's BLAS limit (_one_thread)
#: Ensemble chunk of ours at d <= 4: with the kernel's L2 blocks, 512 systems took 4.39 s and 1024 took 4.48 s
#: (9 beta values x 2048 systems, one thread, one process, best of 2)
CHUNK_FEW = 512
STAGES = {"rk4": 4, "heun": 2}  # velocity evaluations per step
#: head strengths lambda_h of the scalar heads M_h = W_h = lambda_h I (--lambdas; one head M = W = I by default)
LAMBDAS = (1.0,)


def initial(S, seed, d=2):
    """S systems of N i.i.d. uniform tokens on S^{d-1} (angles on the circle)."""
    rng = np.random.default_rng(seed)
    if d == 2:
        th = rng.uniform(0, 2 * np.pi, (S, N))
        return np.stack([np.cos(th), np.sin(th)], -1)
    x = rng.standard_normal((S, N, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def span_coordinates(x):
    """Tokens (S, n, d), d > n, in an orthonormal basis of their span: x^T = Q R, x_i = Q R[:, i],
    so the coordinates are R^T (S, n, n), with the same Gram matrix."""
    if x.shape[2] <= x.shape[1]:
        return x
    r = np.linalg.qr(x.transpose(0, 2, 1), mode="r")
    y = r.transpose(0, 2, 1)
    return y / np.linalg.norm(y, axis=-1, keepdims=True)  # unit rows to round-off


def anchor_one(x, beta, dt=0.1, lambdas=None):
    """The anchors' scheme for one system: projected Euler, dense softmax (a stack of one)."""
    return anchor_batched(x[None], beta, dt, lambdas)[0]


def anchor_batched(x, beta, dt=0.1, lambdas=None):
    """The anchors' scheme, projected Euler with dense softmax, for all systems of one beta
    at once: x of shape (S, n, d), one batched matmul per step and head (generalised to several
    heads: v = sum_h lambda_h softmax(beta lambda_h G) x, G the Gram matrix, formed once per step)."""
    lambdas = LAMBDAS if lambdas is None else lambdas
    for _ in range(int(round(T_FINAL / dt))):
        G = x @ x.transpose(0, 2, 1)
        v = 0.0
        for lam in lambdas:
            s = (beta * lam) * G
            p = np.exp(s - s.max(axis=-1, keepdims=True))
            p /= p.sum(axis=-1, keepdims=True)
            v = v + (p @ x if lam == 1.0 else lam * (p @ x))
        v -= np.sum(v * x, axis=-1, keepdims=True) * x
        x = x + dt * v
        x /= np.linalg.norm(x, axis=-1, keepdims=True)
    return x


def ours_chunk(args):
    """Counts at T and the exps computed, by our path (reduced coordinates, settled systems leave)."""
    x0, betas, method, dt, settle, lambdas, merge = args
    # (one BLAS thread: the caller's limit, as for the anchors; each worker of the pool sets it once)
    y0 = span_coordinates(x0)
    heads = np.asarray(lambdas, dtype=float)[:, None, None] * np.eye(y0.shape[2])[None]  # M_h = W_h
    # chunks measured fastest per layout: CHUNK_FEW systems at d = 2 (the kernel works through them in blocks
    # whose logits sit in L2; metrics.phase_diagram keeps 256, its store keys name it), 128 in span coordinates
    ens = particles.Ensemble(heads, beta=betas, chunk=CHUNK_FEW if y0.shape[2] <= 4 else 128)
    field = ens.settling(EPS, merge=merge) if settle else ens
    traj = particles.simulate(y0, field, t1=T_FINAL, dt=dt, method=method,
                              save=particles.SaveAt(t0=False), progress=False)
    evaluations = field.system_evaluations if settle else len(betas) * traj.n_steps * STAGES[method]
    return n_clusters_batch(traj.x[-1], eps=EPS), evaluations * ens.exps_per_evaluation(N)


def _one_thread():
    """A pool worker's BLAS limit, for its life (entering threadpool_limits costs ~3 ms of library lookup)."""
    global _LIMIT
    _LIMIT = threadpool_limits(1, user_api="blas")


def reference_chunk(x0, betas):
    """The converged reference: RK4 dt = 0.05, full coordinates, every system to T."""
    with threadpool_limits(1, user_api="blas"):
        heads = np.asarray(LAMBDAS, dtype=float)[:, None, None] * np.eye(x0.shape[2])[None]
        ens = particles.Ensemble(heads, beta=betas, chunk=256)
        traj = particles.simulate(x0, ens, t1=T_FINAL, dt=0.05, method="rk4",
                                  save=particles.SaveAt(t0=False), progress=False)
        return n_clusters_batch(traj.x[-1], eps=EPS)


def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a 1/16 workload (for a smoke run)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batched-stride", type=int, default=10, help="time the batched anchor on every k-th beta")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the batched anchor and ours (the "
                    "best per beta)")
    ap.add_argument("--per-beta", type=int, default=None, help="systems per beta (default 2048; --quick: 128)")
    ap.add_argument("--d", type=int, default=2, help="ambient dimension (2: the circle; e.g. 128)")
    ap.add_argument("--dt", type=float, default=1.0, help="step of ours")
    ap.add_argument("--method", default="rk4", choices=("rk4", "heun"), help="fixed-step method of ours")
    ap.add_argument("--no-settle", action="store_true", help="integrate every system to T (no early exit)")
    ap.add_argument("--lambdas", default="1", help="head strengths lambda_h, comma-separated (e.g. 0.5,1,2)")
    ap.add_argument("--accuracy-stride", type=int, default=6, help="the accuracy subset's betas: every k-th")
    ap.add_argument("--accuracy-per", type=int, default=24, help="the accuracy subset's systems per beta")
    ap.add_argument("--merge", type=float, default=0.0, help="ours merges tokens closer than this (phase_diagram's "
                    "merge; 0: the exact flow)")
    return ap.parse_args(argv)


def _timed(fns, timed, per_beta, d, n_beta, rounds):
    """Each fn(x0, beta) of ``fns`` on every system of every timed beta, extrapolated to the n_beta betas: per
    beta the best of ``rounds`` interleaved calls (fn 1, fn 2, ... on the same systems, so that every side
    sees the same machine), summed over the betas; after one untimed call of each on 8 systems (first-call
    costs, lazy imports and buffers, are no part of the workload)."""
    best = np.full((len(fns), len(timed)), np.inf)
    with threadpool_limits(1, user_api="blas"):
        for fn in fns:
            fn(initial(8, 99, d), timed[-1])
        for _ in range(rounds):
            for k, b in enumerate(timed):
                x0 = initial(per_beta, 100 + k, d)
                for f, fn in enumerate(fns):
                    t = time.perf_counter()
                    fn(x0, b)
                    best[f, k] = min(best[f, k], time.perf_counter() - t)
        how = f"x {n_beta}/{len(timed)} betas, best of {rounds} interleaved rounds per beta"
        return [Timing.now(row.sum()).scaled(n_beta / len(timed), how) for row in best]


def _accuracy(betas, d, dt, settle, method, merge=0.0, stride=6, per=24):
    """Counts of the converged reference, of ours and of the anchors' scheme on a subset: ``per`` systems at every
    ``stride``-th beta (the anchor batched per beta: the same scheme and numbers as its per-system loop)."""
    acc_beta = betas[::stride]
    xa = initial(len(acc_beta) * per, 2, d)
    ba = np.repeat(acc_beta, per)
    ref = reference_chunk(xa, ba).reshape(len(acc_beta), per)
    with threadpool_limits(1, user_api="blas"):
        fast = ours_chunk((xa, ba, method, dt, settle, LAMBDAS, merge))[0].reshape(len(acc_beta), per)
        anc = np.stack([n_clusters_batch(anchor_batched(xa[k * per:(k + 1) * per], b), eps=EPS)
                        for k, b in enumerate(acc_beta)])
    return ref, fast, anc


def _exp_floor(n_exps):
    """Exps per second of a plain vectorised np.exp over blocks of one evaluation chunk, one thread."""
    block = np.random.default_rng(3).uniform(-10.0, 0.0, 256 * N * N)  # one chunk of 256 systems
    with threadpool_limits(1, user_api="blas"):
        reps = max(1, int(n_exps // (16 * block.size)))
        t = time.perf_counter()
        for _ in range(reps):
            np.exp(block)
        return reps * block.size / (time.perf_counter() - t)


def _pass_floor(per_chunk, d):
    """Seconds per system evaluation of the three numpy calls no pass of one evaluation avoids: the logits GEMM
    (n x (d+1) by (d+1) x n per system), the exp over the n^2 logits and the sums GEMM, on a chunk of
    ``per_chunk`` systems in this process on one thread (no shift, projection, stepping or Python around them)."""
    rng = np.random.default_rng(4)
    left, right = rng.uniform(-1, 1, (per_chunk, N, d + 1)), rng.uniform(-1, 1, (per_chunk, d + 1, N))
    values, sums = rng.uniform(-1, 1, (per_chunk, N, d + 1)), np.empty((per_chunk, N, d + 1))
    block = max(1, min(per_chunk, L2_LOGITS // (N * N)))  # as the kernel: blocks whose logits sit in L2
    logits = np.empty((block, N, N))

    def three():
        for s0 in range(0, per_chunk, block):
            sl = slice(s0, min(per_chunk, s0 + block))
            E = logits[: sl.stop - s0]
            np.matmul(left[sl], right[sl], out=E)
            np.exp(E, out=E)
            np.matmul(E, values[sl], out=sums[sl])

    with threadpool_limits(1, user_api="blas"):
        three()
        reps = max(20, int(0.5 / max(1e-6, _once(three))))
        t = time.perf_counter()
        for _ in range(reps):
            three()
        return (time.perf_counter() - t) / (reps * per_chunk)


def _once(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main(argv=None):
    global LAMBDAS
    args = _args(argv)
    LAMBDAS = tuple(float(v) for v in args.lambdas.split(","))
    n_beta, per_beta = (90, 128) if args.quick else (90, 2048)
    if args.per_beta is not None:
        per_beta = args.per_beta
    betas = np.linspace(0.1, 9.0, n_beta)
    S, d, dt, settle, method = n_beta * per_beta, args.d, args.dt, not args.no_settle, args.method

    # 1. anchor timing on a subset, extrapolated
    sub = 60
    xs = initial(sub, 1, d)
    with threadpool_limits(1, user_api="blas"):
        t = time.perf_counter()
        for k in range(sub):
            anchor_one(xs[k], betas[k % n_beta])
        anchor = Timing.now(time.perf_counter() - t).scaled(S / sub, f"x {S}/{sub} systems")
    # 1b. batched anchor: all systems of a beta in one batched matmul, as the research scripts do;
    # 2a. ours on the same systems (same initial tokens), in this process, extrapolated the same way
    timed = betas[:: args.batched_stride]
    # both sides integrate to T and count the clusters (ours_chunk counts)
    done = []
    batched, ours_here = _timed(
        [lambda x, b: n_clusters_batch(anchor_batched(x, b), eps=EPS),
         lambda x, b: done.append(ours_chunk((x, np.full(len(x), b), method, dt, settle, LAMBDAS, args.merge))[1])],
        timed, per_beta, d, n_beta, args.rounds)
    exps_done = sum(done[-len(timed):]) * n_beta / len(timed)  # (the last round's calls)
    # 3. accuracy on a subset (before the long run, so a killed run still reports it)
    ref, fast, anc = _accuracy(betas, d, dt, settle, method, args.merge, args.accuracy_stride, args.accuracy_per)
    se = ref.std(axis=1, ddof=1) / np.sqrt(ref.shape[1])
    gap = np.abs(fast.mean(1) - ref.mean(1))
    # 2. ours, full workload
    x0 = initial(S, 0, d)
    bb = np.repeat(betas, per_beta)
    chunks = np.array_split(np.arange(S), 8 * args.workers)
    t = time.perf_counter()
    with ProcessPoolExecutor(args.workers, initializer=_one_thread) as pool:
        jobs = [(x0[c], bb[c], method, dt, settle, LAMBDAS, args.merge) for c in chunks]
        counts = np.concatenate([c for c, _ in pool.map(ours_chunk, jobs)])
    ours_total = time.perf_counter() - t
    stat = counts.reshape(n_beta, per_beta).mean(axis=1)

    ours_name = f"Ensemble + {method.upper()} dt={dt:g}{'' if settle else ' (no early exit)'}" + (
        f", merge={args.merge:g}" if args.merge else "")
    heads = "" if LAMBDAS == (1.0,) else f" x {len(LAMBDAS)} softmax heads lambda_h = {', '.join(map(str, LAMBDAS))}"
    print(header([anchor, batched, ours_here], title=f"workload: {per_beta} systems x n={N} x d={d}{heads} x "
                                                      f"{n_beta} beta values, T={T_FINAL:g} ({S} systems)"))
    print()
    print("| scheme | time (s) | speed-up | max gap of mean clusters vs converged | systems differing |")
    print("|---|---:|---:|---:|---:|")
    print(f"| anchors' projected Euler dt=0.1, 1 thread (extrapolated from {sub} systems) | "
          f"{anchor.seconds:.0f} | 1.0 | {np.abs(anc.mean(1) - ref.mean(1)).max():.4f} | {(anc != ref).mean():.4f} |")
    print(f"| anchors' scheme batched per beta, 1 thread (extrapolated from {len(timed)} betas) | "
          f"{batched.seconds:.0f} | {ratio(anchor, batched):.1f} | same scheme as above | same |")
    print(f"| {ours_name}, 1 thread (extrapolated from the same {len(timed)} betas) | {ours_here.seconds:.0f} | "
          f"{ratio(anchor, ours_here):.1f} | {gap.max():.4f} | {(fast != ref).mean():.4f} |")
    print(f"speed-up of ours against the batched anchor, both in this process on one thread: "
          f"{ratio(batched, ours_here):.1f}x")
    print(f"full workload with {ours_name} on {args.workers} processes: {ours_total:.0f} s wall "
          "(a pool, not comparable with the single-process timings above: no speed-up)")
    # 4. exps/s per core against a plain vectorised np.exp over the same number of entries
    # the dense count: S n^2 exps per head and evaluation, to T
    n_exps = STAGES[method] * round(T_FINAL / dt) * S * N * N * len(LAMBDAS)
    plain_rate = _exp_floor(n_exps)
    ours_rate = n_exps / ours_here.seconds  # one thread, this process
    print(f"exps/s per core: ours {ours_rate:.3g}, plain np.exp {plain_rate:.3g} "
          f"(ours is {plain_rate / ours_rate:.1f}x from the exp floor; same process, one thread each)")
    print(f"exps ours actually computed: {exps_done:.3g} of the dense {n_exps:.3g} ({exps_done / n_exps:.2f}); "
          f"at {exps_done / ours_here.seconds:.3g} computed exps/s ({plain_rate * ours_here.seconds / exps_done:.1f}x "
          "from the floor)")
    ceiling = batched.seconds / (exps_done / plain_rate)
    print(f"ceiling: ours doing nothing but its exps at the plain np.exp rate (no GEMM, no step arithmetic) would be "
          f"{ceiling:.1f}x the batched anchor; {20 / ceiling:.0%} of that pure-exp rate is what 20x needs")
    # the same for GEMM + exp + GEMM on the chunks ours runs (per beta: min(systems per beta, CHUNK_FEW) at d <= 4)
    chunk = min(per_beta, CHUNK_FEW if d <= 4 else 128)
    floor_s = _pass_floor(chunk, min(d, N)) * exps_done / (N * N)
    print(f"ceiling: ours doing nothing but one GEMM + exp + GEMM per evaluation (chunks of {chunk} systems, no "
          f"stepping or glue) would be {batched.seconds / floor_s:.1f}x the batched anchor")
    print(f"accuracy subset: {ref.shape[0]} beta values x {ref.shape[1]} systems; largest standard error of a mean "
          f"count {se.max():.3f}; gap of ours within one standard error at every beta: "
          f"{'yes' if np.all(gap <= se + 1e-12) else 'NO'} (betas beyond it: {int(np.sum(gap > se + 1e-12))}); "
          f"systems whose count differs from the reference's: ours {int((fast != ref).sum())}, the anchor "
          f"{int((anc != ref).sum())}, of {ref.size}")
    print("beta:           ", " ".join(f"{b:5.2f}" for b in betas[::10]))
    print("mean clusters:  ", " ".join(f"{s:5.2f}" for s in stat[::10]))


if __name__ == "__main__":
    main()
