"""Fast against exact summation: one softmax right-hand side on S^1 and S^2, n = 1e3 .. 1e6.

For every (sphere, beta, state, n) a fresh subprocess (one BLAS / OpenMP thread) times

- ``fast``: ``MultiHead(..., summation="fast", tol=TOL).velocity(x)`` (the NUFFT routes,
  including the exact probe rows and any rows patched exactly);
- ``exact``: the same call with ``summation="exact"`` (blocked GEMM + exp), measured up to
  ``--exact-max`` tokens and extrapolated as n^2 beyond (marked ``~``);

and reports their ratio (only where both were timed in the same subprocess: an exact column
extrapolated from another run, timed under other load, gives no speed-up; raise
``--exact-max`` to measure one), the a-posteriori bound, the measured relative error of Z_i and the
velocity error relative to max|v| (against the exact pass on all rows up to ``--exact-max``,
on 256 random rows beyond), and the peak resident memory of the subprocess. States:
``uniform`` (i.i.d. uniform tokens) and ``clustered`` (three caps of angular radius ~1e-3,
the late state of the flow). A markdown table goes to stdout, then one JSON line per row,
then the n log n check: the exponent of time against n from 1e4 to 1e6.

Usage: ``python benchmarks/bench_fastsum.py [--quick] [--tol 1e-8] [--max-n 1000000] [--exact-max 16384]
[--spheres 1,2] [--betas 1,10,100] [--states uniform,clustered]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from _timing import Timing, header, try_ratio

ROW = r"""
import json, resource, sys, time
import numpy as np
from _timing import Timing
from particles import MultiHead, sample_uniform
from particles.summation import exp_sums

d, beta, state, n = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
tol, exact_max = float(sys.argv[5]), int(sys.argv[6])
rng = np.random.default_rng(n + 7 * d)
if state == "uniform":
    x = sample_uniform(n, d=d, rng=rng)
else:
    c = sample_uniform(3, d=d, rng=rng)
    x = c[rng.integers(0, 3, n)] + 1e-3 * rng.standard_normal((n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)

def best(fn, reps):
    out, ts = None, []
    for _ in range(reps):
        t = time.perf_counter(); out = fn(); ts.append(time.perf_counter() - t)
    return out, Timing.now(min(ts))

reps = 3 if n <= 100_000 else 1
fast = MultiHead.scalar([1.0], d=d, beta=beta, kind="softmax", summation="fast", tol=tol)
exact = MultiHead.scalar([1.0], d=d, beta=beta, kind="softmax", summation="exact")
fast.velocity(x[:4096])  # load finufft, plan FFTW once
vf, t_fast = best(lambda: fast.velocity(x), reps)
(pf,) = fast.sums(x)
row = {"d": d, "beta": beta, "state": state, "n": n, "tol": tol, "t_fast": t_fast.to_dict(), "bound": pf.bound,
       "n_exact_rows": pf.n_exact, "route": pf.method}
if n <= exact_max:
    ve, t_exact = best(lambda: exact.velocity(x), 1)
    (pe,) = exact.sums(x)
    rows = np.arange(n)
    row["t_exact"] = t_exact.to_dict()
else:
    rows = np.sort(rng.choice(n, 256, replace=False))
    (pe,) = exp_sums(beta * np.eye(d)[None], x[rows], x, None, summation="exact")
    ve = exact.geom.project_tangent(x[rows], pe.mean)
pf_logz, pf_mean = pf.logz[rows], pf.mean[rows]
row["err_z"] = float(np.max(np.abs(np.expm1(pf_logz - pe.logz))))
row["err_v"] = float(np.max(np.abs(vf[rows] - ve)) / np.max(np.abs(ve)))
row["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(row))
"""


def run_row(d, beta, state, n, tol, exact_max):
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([root, here, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    out = subprocess.run([sys.executable, "-c", ROW, str(d), str(beta), state, str(n), str(tol), str(exact_max)],
                         env=env, cwd=root, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _jsonable(row):
    return {k: (v.to_dict() if isinstance(v, Timing) else v) for k, v in row.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n up to 1e5, beta in {1, 10}")
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--max-n", type=int, default=1_000_000)
    ap.add_argument("--exact-max", type=int, default=16384)
    ap.add_argument("--spheres", default="1,2", help="sphere dimensions, e.g. 2 for S^2 only")
    ap.add_argument("--betas", default=None, help="comma-separated (default 1,10,100; --quick: 1,10)")
    ap.add_argument("--states", default="uniform,clustered")
    args = ap.parse_args()
    ns = [n for n in (1000, 4096, 16384, 100_000, 1_000_000) if n <= (100_000 if args.quick else args.max_n)]
    betas = (tuple(map(float, args.betas.split(","))) if args.betas
             else ((1.0, 10.0) if args.quick else (1.0, 10.0, 100.0)))
    dims = tuple(int(k) + 1 for k in args.spheres.split(","))
    states = tuple(args.states.split(","))
    rows = []
    for d in dims:
        for beta in betas:
            for state in states:
                ref = None
                for n in ns:
                    r = run_row(d, beta, state, n, args.tol, args.exact_max)
                    r["t_fast"] = Timing.from_dict(r["t_fast"])
                    if "t_exact" in r:
                        r["t_exact"] = Timing.from_dict(r["t_exact"])
                        ref = (n, r["t_exact"])
                    else:
                        r["t_exact"] = ref[1].scaled((n / ref[0]) ** 2, f"as n^2 from n = {ref[0]}")
                    # None where the exact column was timed in another subprocess (extrapolated)
                    r["speedup"] = try_ratio(r["t_exact"], r["t_fast"])
                    rows.append(r)
                    print(json.dumps(_jsonable(r)), file=sys.stderr, flush=True)
    timings = [r["t_fast"] for r in rows] + [r["t_exact"] for r in rows if not r["t_exact"].extrapolated]
    print(header(timings, title=f"# Fast summation, softmax RHS, one thread per subprocess, tol = {args.tol:g}"))
    print("exact columns marked ~ are extrapolated as n^2 from the largest n timed (another subprocess): no speed-up")
    print()
    print("| sphere | beta | state | n | route | fast (s) | exact (s) | speed-up | bound | err Z | err v | exact rows "
          "| peak MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ex = ("~" if r["t_exact"].extrapolated else "") + f"{r['t_exact'].seconds:.3g}"
        sp = "n/a" if r["speedup"] is None else f"{r['speedup']:.0f}x"
        print(f"| S^{r['d'] - 1} | {r['beta']:g} | {r['state']} | {r['n']} | {r['route']} | "
              f"{r['t_fast'].seconds:.3g} | {ex} | {sp} | {r['bound']:.1e} | {r['err_z']:.1e} | {r['err_v']:.1e} | "
              f"{r['n_exact_rows']} | {r['peak_rss_mib']:.0f} |")
    print()
    for r in rows:
        print(json.dumps(_jsonable(r)))
    import numpy as np

    print("\n# time exponent p in t ~ n^p from n = 1e4.. to the largest n (n log n gives p ~ 1.0-1.1)")
    for d in dims:
        for beta in betas:
            for state in states:
                sel = [r for r in rows
                       if r["d"] == d and r["beta"] == beta and r["state"] == state and r["n"] >= 10_000]
                if len(sel) >= 2:
                    p = np.polyfit(np.log([r["n"] for r in sel]), np.log([r["t_fast"].seconds for r in sel]), 1)[0]
                    print(f"S^{d - 1} beta={beta:g} {state}: p = {p:.2f}")


if __name__ == "__main__":
    main()
