"""Where the seconds of one fast S^2 softmax right-hand side go, on ducc0's NUFFT and on FINUFFT's.

n i.i.d. uniform tokens on S^2 (default 10^6), one scalar head, beta = 10, ``tol = 1e-8`` (relative error of every
Z_i), one thread. In one process, for each library: ``MultiHead(..., summation="fast").velocity`` end to end (best
of ``--repeat``), then the same steps timed one by one: the route and the exact probe rows that set the NUFFT
tolerance, the transform group (points scaled into the box, the Gaussian's coefficients, the terms of the bound),
sorting the points (ducc0: one plan per tolerance), the type-1 transform (spreading + FFT), the type-2 transform
(FFT + interpolation), and the rest of the evaluation (strengths, the product with the coefficients, the type-2
tolerance, S/T, the a-posteriori bound); "Python glue" is the end-to-end time minus those steps (the projection
onto the tangent spaces, the model's bookkeeping). The FFT share of each transform is a bare complex FFT of the
fine grid (2x the modes per axis), timed apart. Then the peak resident memory of one right-hand side in a fresh
subprocess per library, and the relative error of Z_i on 256 random rows against the exact pass.

Run:  python benchmarks/bench_fastsum_split.py [--n 1000000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from _timing import Timing, best_of, header
from threadpoolctl import threadpool_limits

MEMORY = r"""
import json, sys
import numpy as np
from particles import MultiHead, sample_uniform
from particles._summation import routes

def hwm():  # peak resident memory of this program (VmHWM: ru_maxrss would keep the parent's peak)
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024

routes.NUFFT_LIBRARY[0] = sys.argv[1]
n = int(sys.argv[2])
x = sample_uniform(n, d=3, rng=np.random.default_rng(0))
base = hwm()
MultiHead.scalar([1.0], d=3, beta=10.0, kind="softmax", summation="fast", tol=1e-8).velocity(x)
print(json.dumps({"base": base, "peak": hwm()}))
"""


def _steps(x, library, tol=1e-8, beta=10.0):
    """Seconds of each step of the fast pass of one head (FastPlan.run's order), the transforms and the
    sorting of the points timed inside the library calls."""
    import ducc0

    from particles._summation import routes
    from particles._summation.groups import build_groups, fine_grid, prior_gsum
    from particles._summation.plan import _EPS_MIN, _MODEL_SHARE, FastPlan, _type1_eps

    routes.NUFFT_LIBRARY[0] = library
    out, clock = {}, time.perf_counter
    sort, calls, seen = [0.0], {"type 1 (spreading + FFT)": 0.0, "type 2 (FFT + interpolation)": 0.0}, {}

    def timed_plan(*args, **kwargs):
        t = clock()
        made = make_plan(*args, **kwargs)
        sort[0] += clock() - t
        return made

    def timed(name, method):
        def run(self, *args):
            s0, t = sort[0], clock()
            res = method(self, *args)
            calls[name] += clock() - t - (sort[0] - s0)
            seen.setdefault("eps", []).append(self.eps if len(args) < 2 else max(self.eps, args[1]))
            return res
        return run

    make_plan, type1, type2 = ducc0.nufft.plan, routes.Transforms.type1, routes.Transforms.type2
    ducc0.nufft.plan = timed_plan
    routes.Transforms.type1 = timed("type 1 (spreading + FFT)", type1)
    routes.Transforms.type2 = timed("type 2 (FFT + interpolation)", type2)
    try:
        BM = beta * np.eye(3)[None]
        t = clock()
        plan = FastPlan(BM, x, x, None, tol=tol, strict=True)
        chosen = plan.select(True, auto=False)
        by_eps = plan.tolerances(chosen)
        out["route + exact probe rows"] = clock() - t
        t = clock()
        (g,) = build_groups(chosen, x, x, None, _MODEL_SHARE * by_eps[0])
        eps1 = max(_EPS_MIN, _type1_eps(by_eps[0] / prior_gsum(g)))
        out["transform group (scaling, coefficients, bound terms)"] = clock() - t
        t = clock()
        plan.evaluate(g, eps1, by_eps, auto=False, last=True)
        total = clock() - t
    finally:
        ducc0.nufft.plan, routes.Transforms.type1, routes.Transforms.type2 = make_plan, type1, type2
    out["sorting the points (ducc0 plans)"] = sort[0]
    out.update(calls)
    out["strengths, modes, S/T, bound check"] = total - sort[0] - sum(calls.values())
    grid = np.zeros(tuple(2 * k for k in g.n_modes), complex)
    t = clock()
    np.fft.fftn(grid)
    out["(FFT of the fine grid, once)"] = clock() - t
    return out, tuple(seen["eps"]), g.n_modes, fine_grid(g.n_modes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    from particles import MultiHead, sample_uniform
    from particles._summation import routes
    from particles.summation import exp_sums

    libraries = ["ducc0", "finufft"]
    x = sample_uniform(args.n, d=3, rng=np.random.default_rng(0))
    model = MultiHead.scalar([1.0], d=3, beta=10.0, kind="softmax", summation="fast", tol=1e-8)
    rows = np.sort(np.random.default_rng(1).choice(args.n, 256, replace=False))
    (ref,) = exp_sums(10.0 * np.eye(3)[None], x[rows], x, None, summation="exact")
    totals, splits, errs = {}, {}, {}
    with threadpool_limits(1):
        import particles

        particles.set_num_threads(1)
        for lib in libraries:
            routes.NUFFT_LIBRARY[0] = lib
            model.velocity(x[:4096])
            totals[lib] = best_of(lambda: model.velocity(x), args.repeat, warmup=False)
            (fast,) = model.sums(x)
            errs[lib] = float(np.max(np.abs(np.expm1(fast.logz[rows] - ref.logz))))
            splits[lib] = _steps(x, lib)
    print(f"## one S^2 softmax right-hand side, n = {args.n}, beta = 10, tol = 1e-8, one thread\n")
    print("| step | " + " | ".join(f"{lib} (s)" for lib in libraries) + " |")
    print("|---|" + "---:|" * len(libraries))
    for step in splits[libraries[0]][0]:
        print(f"| {step} | " + " | ".join(f"{splits[lib][0][step]:.3f}" for lib in libraries) + " |")
    for lib in libraries:
        splits[lib][0]["Python glue (end to end minus the steps)"] = totals[lib].seconds - sum(
            v for k, v in splits[lib][0].items() if not k.startswith("("))
    print("| Python glue (end to end minus the steps) | " + " | ".join(
        f"{splits[lib][0]['Python glue (end to end minus the steps)']:.3f}" for lib in libraries) + " |")
    print(f"| **end to end, best of {args.repeat}** | " + " | ".join(
        f"**{totals[lib].seconds:.3f}**" for lib in libraries) + " |")
    print("| max rel. error of Z_i (256 rows) | " + " | ".join(f"{errs[lib]:.1e}" for lib in libraries) + " |")
    _, (eps1, eps2), modes, fine = splits["ducc0"]  # the tolerances of the type-1 and type-2 calls
    print(f"\nNUFFT tolerances (ducc0) {eps1:.1e} (type 1) and {eps2:.1e} (type 2), modes {modes}, "
          f"fine grid {fine} points; "
          f"FINUFFT / ducc0 end to end: {totals['finufft'].seconds / totals['ducc0'].seconds:.2f}x (same process)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", HEADFLOW_NUM_THREADS="1")
    print("\n| library | peak resident memory before the right-hand side (MiB) | peak after it (MiB) |")
    print("|---|---:|---:|")
    for lib in libraries:
        mem = json.loads(subprocess.run([sys.executable, "-c", MEMORY, lib, str(args.n)], env=env, check=True,
                                        capture_output=True, text=True).stdout.splitlines()[-1])
        print(f"| {lib} | {mem['base']:.0f} | {mem['peak']:.0f} |")
    print()
    print(header(list(totals.values()) + [Timing.now(0.0)], title="fast summation split"))


if __name__ == "__main__":
    main()
