"""What the declared parameters cost: a 1000-step ``simulate`` with and without its declaration.

Every public callable validates its arguments once, at the call, from its declaration
(:func:`particles.validation.declare`); the solve loop's own evaluations (the model's ``__call__``,
``sums(..., check=False)``) skip it. This script times ``particles.simulate`` (declared) against
the same function undecorated (``simulate.__wrapped__``, the body alone) on a 1000-step RK4 run of
softmax heads on S^2, interleaved pair by pair (best of ``--repeat`` pairs), at a few token counts, and
the validation alone (``declaration(simulate).validate`` on the same arguments).

Target (issue "Every parameter's rule written once"): validation adds < 5 % to a 1000-step
``simulate`` call.

Run:  python benchmarks/bench_validation.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import inspect

import _timing
import numpy as np

import particles
from particles.validation import declaration


def _case(n: int):
    model = particles.MultiHead.scalar([1.0, 0.5], d=3, beta=2.0, kind="softmax")
    x0 = particles.sample_uniform(n, d=3, rng=np.random.default_rng(0))
    return x0, model, dict(t1=1.0, dt=1e-3, method="rk4")


def measure(n: int, repeat: int):
    """(declared, bare, validation alone) timings at n tokens."""
    bare = particles.simulate.__wrapped__
    x0, model, kw = _case(n)
    assert np.array_equal(particles.simulate(x0, model, **kw).x, bare(x0, model, **kw).x)
    # interleaved pair by pair, best of each: a load change hits both columns alike
    pairs = [(_timing.best_of(lambda: particles.simulate(x0, model, **kw), 1, warmup=False),
              _timing.best_of(lambda: bare(x0, model, **kw), 1, warmup=False)) for _ in range(repeat)]
    declared = min((p[0] for p in pairs), key=lambda t: t.seconds)
    plain = min((p[1] for p in pairs), key=lambda t: t.seconds)
    bound = inspect.signature(bare).bind(x0, model, **kw)
    bound.apply_defaults()
    decl = declaration(particles.simulate)
    alone = _timing.best_of(lambda: decl.validate(dict(bound.arguments)), repeat * 20)
    return declared, plain, alone


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--n", type=int, nargs="+", default=[16, 64, 256])
    args = ap.parse_args(argv)
    rows, timings = [], []
    for n in args.n:
        declared, plain, alone = measure(n, args.repeat)
        timings += [declared, plain, alone]
        rows.append((n, declared.seconds, plain.seconds, alone.seconds * 1e3,
                     100 * (_timing.ratio(declared, plain) - 1), 100 * alone.seconds / plain.seconds))
    print(_timing.header(timings, title="simulate: declared against undecorated (1000 RK4 steps, softmax, S^2)"))
    print(f"{'n':>5}  {'declared s':>10}  {'bare s':>8}  {'validate ms':>11}  {'overhead %':>10}  {'validate %':>10}")
    for n, d, b, v, o, vp in rows:
        print(f"{n:>5}  {d:>10.4f}  {b:>8.4f}  {v:>11.3f}  {o:>10.2f}  {vp:>10.3f}")
    print("overhead %: declared / bare - 1 (best of interleaved pairs, same process);\n"
          "validate %: the validation alone over the bare run.")


if __name__ == "__main__":
    main()
