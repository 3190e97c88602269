"""Model variants of the reference codes, as options of the one field (MultiHead).

Causal masking (token i attends to j <= i): the first token of scalar heads stays fixed and
the Theorem 11 identity fails (rate residual / kinetic rate). Post-LN: Euler with update=
"post_ln" is the layer x <- LN(x + dt Attn(x)); its error against the sphere flow halves with
dt. Pre-LN (flat): attention reads directions, the stream's norms drift. nGPT update: every
speed is sin(angle(v_i, x_i)) <= 1. Time-dependent weights W(t) = (1 + t) W (softmax): a time
change tau = t + t^2/2. A stack of identical layers is one run.

Run:  python examples/variants.py --out outputs
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples._common import parse, pyplot, save_figure, write_table
from particles import MultiHead, SaveAt, TimeDependent, diagnostics_fn, sample_uniform, simulate, simulate_layers


def main(argv=None):
    args, out = parse(__doc__, argv)
    rng = np.random.default_rng(7)
    n, d = (8, 3) if args.quick else (32, 3)
    A = rng.standard_normal((2, d, d))
    M = (A + A.transpose(0, 2, 1)) / 2
    x0 = sample_uniform(n, d=d, rng=rng)
    rows = []

    ts = np.linspace(0, 2, 21)
    causal = MultiHead.scalar([1.0, 0.5], d=d, beta=1.0, causal=True)
    tr = simulate(x0, causal, t1=2.0, dt=0.01, save=SaveAt(ts=ts))
    rows.append(("causal scalar heads: max |x_1(t) - x_1(0)|", float(np.abs(tr.x[:, 0] - x0[0]).max()), 0.0))
    sym = MultiHead(M, beta=1.0, causal=True)
    diag = simulate(x0, sym, t1=2.0, dt=0.01, save=SaveAt(ts=ts, fn=diagnostics_fn(sym))).saved
    full = simulate(x0, MultiHead(M, beta=1.0), t1=2.0, dt=0.01,
                    save=SaveAt(ts=ts, fn=diagnostics_fn(MultiHead(M, beta=1.0)))).saved
    ratio = np.abs(diag["rate_residual"]) / diag["kinetic"]
    rows.append(("causal USA, C3+C4: max |rate residual| / kinetic", float(ratio.max()), "> 0 (0 without mask)"))

    sphere = MultiHead(M, beta=1.0, kind="softmax")
    post = MultiHead(M, beta=1.0, kind="softmax", update="post_ln")
    exact = simulate(x0, sphere, t1=1.0, dt=5e-3).x[-1]
    dts = np.array([0.04, 0.02, 0.01])
    errs = np.array([np.abs(simulate(x0, post, t1=1.0, dt=h, method="euler").x[-1] - exact).max() for h in dts])
    rows.append(("post-LN Euler: error ratio dt -> dt/2", float(errs[-2] / errs[-1]), 2.0))

    pre = MultiHead(M, beta=1.0, kind="softmax", geometry="flat", update="pre_ln")
    norms = np.linalg.norm(simulate(x0, pre, t1=1.0, dt=0.01).x[-1], axis=1)
    rows.append(("pre-LN flat: max | |x_i(1)| - 1 |", float(np.abs(norms - 1).max()), "> 0 (norms drift)"))

    ngpt = MultiHead(M, rng.standard_normal((2, d, d)), beta=1.0, kind="softmax", update="ngpt")
    speeds = np.linalg.norm(simulate(x0, ngpt, t1=1.0, dt=0.01, save=SaveAt(ts=np.linspace(0, 1, 11),
                                                                               fn=lambda t, x: {"v": ngpt(t, x)}))
                            .saved["v"], axis=-1)
    rows.append(("nGPT update: max speed", float(speeds.max()), 1.0))

    field = TimeDependent(lambda t: (M, (1.0 + t) * M), sphere)
    varying = simulate(x0, field, t1=1.0, dt=1e-2, geometry="sphere").x[-1]
    constant = simulate(x0, sphere, t1=1.5, dt=1e-2).x[-1]
    rows.append(("W(t) = (1 + t) W vs constant run at t + t^2/2", float(np.abs(varying - constant).max()), 0.0))

    stack = simulate_layers(x0, [sphere] * 3, layer_time=0.5, dt=0.05)
    one = simulate(x0, sphere, t1=1.5, dt=0.05).x[-1]
    rows.append(("3 identical layers vs one run", float(np.abs(stack.x[-1] - one).max()), 0.0))
    print(write_table(out / "variants.md", ["check", "measured", "expected"], rows))

    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    a.plot(ts, diag["energy_multi"], label="causal")
    a.plot(ts, full["energy_multi"], label="full attention (gradient flow)")
    a.set(xlabel="t", ylabel="E_multi", title="Causal masking: no longer a gradient flow")
    a.legend(fontsize=8)
    b.loglog(dts, errs, "o-", label="post-LN Euler vs sphere flow")
    b.loglog(dts, errs[-1] * dts / dts[-1], "k:", label="slope 1")
    b.set(xlabel="dt", ylabel="max error at t=1", title="Post-LN layers converge to the sphere flow")
    b.legend(fontsize=8)
    save_figure(fig, out / "variants.png")
    return rows


if __name__ == "__main__":
    main()
