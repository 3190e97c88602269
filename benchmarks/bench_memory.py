"""Peak memory of every metric against n (up to 10^6): ``python benchmarks/bench_memory.py``.

Each (metric, n) runs in a fresh subprocess; the figure is the growth of the peak resident
set (``ru_maxrss``) during the call, over the baseline after imports and data creation
(d = 3; "collapsed" is two clusters of n/2 nearly identical tokens, the worst case of
neighbour-list clustering). Metrics with O(n^2) time (energies, entropy, leaders,
silhouette) stop at ``--max-n-quadratic``; the dense exact distances report "refused"
above ``metrics.MAX_DENSE_PAIRS``. Target: < 500 MB for every metric at n = 10^5.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from _timing import Timing, header

CHILD = r"""
import resource, sys, time
import numpy as np
import metrics, particles
name, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
if name.endswith("collapsed"):
    x = particles.normalize(np.repeat(np.eye(3)[:2], n // 2, 0) + 1e-9 * rng.standard_normal((n // 2 * 2, 3)))
else:
    x = particles.sample_uniform(n, d=3, rng=rng)
model = particles.MultiHead(np.eye(3), beta=1.0, kind="softmax")
calls = {
    "n_clusters(collapsed)": lambda: metrics.n_clusters(x, eps=1e-3),
    "n_clusters(uniform)": lambda: metrics.n_clusters(x, eps=1e-3),
    "cluster_sizes(collapsed)": lambda: metrics.cluster_sizes(x, eps=1e-3),
    "distance_to_uniform": lambda: metrics.distance_to_uniform(x),
    "sliced_wasserstein_sphere": lambda: metrics.sliced_wasserstein_sphere(x, x[::-1]),
    "wasserstein": lambda: metrics.wasserstein(x, x[::-1]),
    "sinkhorn_divergence": lambda: metrics.sinkhorn_divergence(x, x[::-1]),
    "energy_multi": lambda: model.energy(x),
    "mean_entropy": lambda: metrics.mean_entropy(x, model),
    "leaders": lambda: metrics.leaders(x, model, k=5),
    "silhouette(collapsed)": lambda: metrics.silhouette(x),
}
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
try:
    calls[name]()
    status = "ok"
except particles.InvalidParameterError:
    status = "refused"
dt = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"{(peak - base) / 1024:.1f} {dt:.2f} {status}")
"""

QUADRATIC = {"energy_multi", "mean_entropy", "leaders", "silhouette(collapsed)"}
NAMES = ["n_clusters(collapsed)", "n_clusters(uniform)", "cluster_sizes(collapsed)", "distance_to_uniform",
         "sliced_wasserstein_sphere", "wasserstein", "sinkhorn_divergence", "energy_multi", "mean_entropy",
         "leaders", "silhouette(collapsed)"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10**3, 10**4, 10**5, 10**6])
    parser.add_argument("--max-n-quadratic", type=int, default=10**4,
                        help="largest n for the O(n^2)-time metrics (10^5 takes minutes each)")
    parser.add_argument("--metrics", nargs="+", default=NAMES)
    args = parser.parse_args()
    timings, lines = [], []
    threads = ", ".join(f"{k}={os.environ[k]}" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
                        if k in os.environ) or "not set"
    lines.append(f"{'metric':28s}" + "".join(f"{n:>22,d}" for n in args.n))
    lines.append(f"{'':28s}" + "".join(f"{'peak MB / s':>22s}" for _ in args.n))
    for name in args.metrics:
        row = f"{name:28s}"
        for n in args.n:
            if name in QUADRATIC and n > args.max_n_quadratic:
                row += f"{'(skipped: O(n^2) time)':>22s}"
                continue
            out = subprocess.run([sys.executable, "-c", CHILD, name, str(n)], capture_output=True, text=True)
            if out.returncode:
                row += f"{'error':>22s}"
                print(out.stderr, file=sys.stderr)
                continue
            mb, sec, status = out.stdout.split()
            timings.append(Timing.now(float(sec)))
            cell = f"{float(mb):.0f} / {float(sec):.1f}" if status == "ok" else "refused"
            row += f"{cell:>22s}"
        lines.append(row)
        print(row, file=sys.stderr, flush=True)  # progress; the table is printed at the end
    print(header(timings, title=f"peak memory, one subprocess per cell (thread variables: {threads})"))
    print()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
