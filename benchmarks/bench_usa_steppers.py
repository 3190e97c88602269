"""USA phase-diagram systems at large beta: steppers against a shared dopri5 step at rtol 1e-8.

S systems of n = 32 i.i.d. uniform tokens on S^{d-1} (d = 8 by default), one USA head
M = W = I, T = 1, 61 save times; each system leaves once certified settled
(``Ensemble.settling``, as in ``metrics.phase_diagram``). For each beta and each stepper the table
gives the velocity evaluations per system (``system_evaluations / S``), the wall time in this
process (one BLAS thread), its ratio to the reference's, and the largest difference of any
system's clustered-pair fraction (<x_i, x_j> >= 0.999) at any save time against the reference
(dopri5, one step shared by the stack, rtol 1e-8). The steppers:

- ``dopri5`` at rtol 1e-6: the shared step, looser;
- ``dopri5_systems`` at rtol 1e-6: one adaptive step per system inside each save interval;
- ``dopri5_systems (polynomial)``: the same on the polynomial extension of the USA field off the
  sphere (the velocity at x itself, not at x/|x|: the field before the direction-only
  extension of ``Ensemble``), whose radial contraction 2 e^beta m/n bounds an explicit step;
- ``dopri5_systems (merge 1e-6)``: the same with the tokens that come within 1e-6 of each other
  at an accepted step joined for good (``Ensemble.settling(..., merge=1e-6)``, the example's setting);
- ``rkc`` at rtol 1e-5: Runge-Kutta-Chebyshev with the Jacobian bound of ``Ensemble``, shared step.

A second table integrates the first ``--single`` systems one at a time at the largest beta
(no shared step): dopri5 against rkc at rtol 1e-5, evaluations per system and time.

Run:  python benchmarks/bench_usa_steppers.py [--systems 64] [--d 8] [--betas 3,6,9]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _timing  # noqa: E402

from metrics._observables.pairs import pair_fraction as _pair_fraction  # noqa: E402
from metrics._studies.phase import _initial  # noqa: E402
from particles import Ensemble, SaveAt, simulate  # noqa: E402

RHO_C = 0.999
CONFIGS = [("dopri5", 1e-8), ("dopri5", 1e-6), ("dopri5_systems", 1e-6), ("dopri5_systems (polynomial)", 1e-6),
           ("dopri5_systems (merge 1e-6)", 1e-6), ("rkc", 1e-5)]


class _Polynomial(Ensemble):
    """The USA field at x itself off the sphere (no x/|x|): the extension Ensemble replaced."""

    def _velocity(self, x):
        out = np.empty_like(x)
        self._scalar_velocity(x, self.beta, 0, out)  # the fused pass on x itself (S <= chunk here)
        return out


def run(x0, beta, method, rtol):
    """Clustered-pair fractions (61 saves, S), evaluations per system, and the timing."""
    S = x0.shape[0]
    method, _, variant = method.partition(" ")
    cls = _Polynomial if variant == "(polynomial)" else Ensemble
    merge = 1e-6 if variant == "(merge 1e-6)" else 0.0
    field = cls(np.eye(x0.shape[2]), beta=np.full(S, beta), kind="usa").settling(np.arccos(RHO_C) * (1 - 1e-6),
                                                                                 merge=merge)
    save = SaveAt(ts=np.linspace(0.0, 1.0, 61), x=False, fn=lambda t, x: {"pairs": _pair_fraction(x, RHO_C)})
    t = time.perf_counter()
    traj = simulate(x0, field, t1=1.0, dt=1e-4, method=method, rtol=rtol, atol=rtol * 1e-2, save=save, progress=False)
    timing = _timing.Timing.now(time.perf_counter() - t)
    return np.asarray(traj.saved["pairs"]), field.system_evaluations / S, timing


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--systems", type=int, default=64)
    ap.add_argument("--d", type=int, default=8)
    ap.add_argument("--betas", default="3,6,9")
    ap.add_argument("--single", type=int, default=8, help="systems integrated one at a time (second table; 0: none)")
    args = ap.parse_args(argv)
    x0 = _initial(args.systems, 32, args.d, "uniform", np.random.default_rng(1))
    rows, timings = [], []
    for beta in (float(b) for b in args.betas.split(",")):
        ref = None
        for method, rtol in CONFIGS:
            pairs, evals, timing = run(x0, beta, method, rtol)
            timings.append(timing)
            if ref is None:
                ref, ref_evals, ref_time = pairs, evals, timing
            rows.append((beta, method, rtol, evals, ref_evals / evals, timing.seconds,
                         _timing.ratio(ref_time, timing), float(np.abs(pairs - ref).max())))
    print(_timing.header(timings, title=f"{args.systems} USA systems, n = 32, d = {args.d}, T = 1, 61 saves"))
    print("| beta | method | rtol | evaluations / system | fewer than ref | seconds | speed-up | max |pairs - ref| |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for beta, method, rtol, evals, fewer, sec, speed, diff in rows:
        print(f"| {beta:g} | {method} | {rtol:g} | {evals:.0f} | {fewer:.2f}x | {sec:.2f} | {speed:.2f}x | "
              f"{diff:.4f} |")
    if args.single < 1:
        return
    beta = float(args.betas.split(",")[-1])
    single = {}
    for method in ("dopri5", "rkc"):
        runs = [run(x0[s:s + 1], beta, method, 1e-5) for s in range(args.single)]
        single[method] = (np.mean([r[1] for r in runs]), _timing.Timing.now(sum(r[2].seconds for r in runs)),
                          max(float(np.abs(r[0] - ref_r[0]).max()) for r, ref_r in zip(runs, single["dopri5"][3]))
                          if method != "dopri5" else 0.0, runs)
    print(f"\none system at a time, beta = {beta:g}, first {args.single} systems, rtol 1e-5")
    print("| method | evaluations / system | seconds | max |pairs - dopri5| |")
    print("|---|---:|---:|---:|")
    for method, (evals, timing, diff, _) in single.items():
        print(f"| {method} | {evals:.0f} | {timing.seconds:.2f} | {diff:.4f} |")
    print(f"rkc / dopri5: {single['rkc'][0] / single['dopri5'][0]:.2f}x the evaluations, "
          f"{_timing.ratio(single['rkc'][1], single['dopri5'][1]):.2f}x the time")


if __name__ == "__main__":
    main()
