"""The pieces of the three-head phase-diagram workload, each against its plain reference, in one run.

At S = 128 systems of n = 32 tokens on S^15 (three softmax heads M_h = W_h = lambda_h I, lambda = 0.5, 1, 2,
beta = 4), one thread, best of ``--repeat`` interleaved rounds:

- ``shared pass``: ``Ensemble._velocity``, whose heads of one score direction share one Gram GEMM, one exp
  (the other heads' E as products of powers) and one sums GEMM (particles/_model/ensemble_shared.py), against
  the same ensemble with the shared pass switched off (each head its own fused pass);
- ``merging test``: ``Groups.update`` on a late state (8 clusters of 4 tokens 1e-4 apart, no pair within
  delta = 1e-6: the step-after-step case), against the plain test that forms every system's n^2 squared
  distances with fresh temporaries (in the Gram form |x_i|^2 + |x_j|^2 - 2 <x_i, x_j>; Groups takes the
  difference form on the pairs its projection screen leaves, here none).

Run:  python benchmarks/bench_shared_pass.py [--repeat 5]
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import best_of, header, ratio
from threadpoolctl import threadpool_limits

import particles
from particles._model.merging import Groups

S, N, D, DELTA = 128, 32, 16, 1e-6


def plain_merging_test(rep: np.ndarray, x: np.ndarray, delta: float) -> np.ndarray:
    """The systems where two tokens of different groups lie within delta, from all n^2 squared distances."""
    sq = np.einsum("snd,snd->sn", x, x)
    d2 = sq[:, :, None] + sq[:, None, :] - 2.0 * (x @ x.transpose(0, 2, 1))
    same = rep[:, :, None] == rep[:, None, :]
    return np.nonzero(np.any((same | (d2 < delta * delta)) != same, axis=(1, 2)))[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((S, N, D))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    heads = np.array([0.5, 1.0, 2.0])[:, None, None] * np.eye(D)[None]
    shared = particles.Ensemble(heads, beta=np.full(S, 4.0), chunk=S)
    per_head = particles.Ensemble(heads, beta=np.full(S, 4.0), chunk=S)
    object.__setattr__(per_head, "_shared", None)  # (the plan of the shared pass: None runs each head's own pass)
    gap = np.abs(shared.velocity(x) - per_head.velocity(x)).max() / np.abs(per_head.velocity(x)).max()
    centres = rng.standard_normal((S, 8, D))
    y = np.repeat(centres, 4, axis=1) + 1e-4 * rng.standard_normal((S, N, D))
    y /= np.linalg.norm(y, axis=-1, keepdims=True)
    groups, systems = Groups(S, N, DELTA), np.arange(S)
    assert plain_merging_test(groups.rep, y, DELTA).size == 0  # nothing to join: both sides do the same work
    cases = {"shared pass": (lambda: shared._velocity(x), lambda: per_head._velocity(x)),
             "merging test": (lambda: groups.update(systems, y), lambda: plain_merging_test(groups.rep, y, DELTA))}
    best = {k: [None, None] for k in cases}
    with threadpool_limits(1, user_api="blas"):
        for _ in range(args.repeat):  # interleaved rounds: both sides see the same machine
            for k, fns in cases.items():
                for side, fn in enumerate(fns):
                    t = best_of(fn, 20)
                    if best[k][side] is None or t.seconds < best[k][side].seconds:
                        best[k][side] = t
    print(header([t for pair in best.values() for t in pair], title=f"S = {S} systems, n = {N}, d = {D}, "
                 "one thread, best of the interleaved rounds"))
    print(f"shared pass against the per-head passes: largest relative difference {gap:.1e}\n")
    print("| piece | ours (ms) | plain reference (ms) | reference / ours |\n|---|---:|---:|---:|")
    for k, (ours, ref) in best.items():
        print(f"| {k} | {ours.seconds * 1e3:.3f} | {ref.seconds * 1e3:.3f} | {ratio(ref, ours):.2f} |")


if __name__ == "__main__":
    main()
