"""Theorem 27: attention entropy along the flow, and its rise to log n as tokens collapse.

(1) The identity dH_i/dt = -beta^2 Cov_{p_i}(s_ij, s'_ij) holds along any trajectory:
checked by central differences on generic data, where the per-token entropy is NOT
monotone in general (we show a token whose entropy falls). (2) Equiangular tokens with a
scalar softmax head: H(rho) has a closed form and rises monotonically to log n.

Run:  python examples/entropy.py --out outputs
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples._common import parse, pyplot, save_figure, write_table
from particles import MultiHead, SaveAt, sample_uniform, simulate
from particles import theory as th


def entropy_rate_identity(model, x):
    """(finite-difference dH/dt, Theorem 27 prediction), one value per token (head 0)."""
    M = model.M[0]
    xdot = model.velocity(x)
    s = x @ M @ x.T
    sdot = xdot @ M @ x.T + x @ M @ xdot.T
    p = np.exp(model.beta * (s - s.max(1, keepdims=True)))
    p /= p.sum(1, keepdims=True)
    cov = (p * s * sdot).sum(1) - (p * s).sum(1) * (p * sdot).sum(1)
    h = 1e-4
    kw = dict(method="dopri5", rtol=1e-13, atol=1e-15, dt=h / 4)
    back = MultiHead(model.M, -model.W, beta=model.beta, kind=model.kind)
    fd = (model.entropy(simulate(x, model, t1=h, **kw).x[-1])[0]
          - model.entropy(simulate(x, back, t1=h, **kw).x[-1])[0]) / (2 * h)
    return fd, -model.beta**2 * cov


def run(n=10, beta=3.0, lam=1.0, t1=10.0, seed=1):
    rng = np.random.default_rng(seed)
    generic = MultiHead(np.diag([1.0, 0.3, -0.5]), beta=2.0, kind="softmax")
    x = sample_uniform(n, d=3, rng=rng)
    fd, pred = entropy_rate_identity(generic, x)
    ts = np.linspace(0, t1, 51)
    traj = simulate(x, generic, t1=t1, dt=0.01, save=SaveAt(ts=ts, fn=lambda t, y: {"H": generic.entropy(y)[0]}))
    falls = int(np.sum(np.any(np.diff(traj.saved["H"], axis=0) < -1e-9, axis=0)))
    eq = MultiHead.scalar([lam], d=n, beta=beta, kind="softmax")
    traj_eq = simulate(th.equiangular_tokens(n, 0.0), eq, t1=t1, dt=0.01,
                       save=SaveAt(ts=ts, fn=lambda t, y: {"H": eq.entropy(y)[0]}))
    rho = np.array([th.mean_rho(y) for y in traj_eq.x])
    H_closed = th.entropy_equiangular(rho, n=n, beta=beta, lam=lam)
    rows = [
        ("Theorem 27 identity, generic data", "max |FD - prediction|", float(np.abs(fd - pred).max())),
        ("generic data", "tokens whose entropy falls at some time", falls),
        ("equiangular", "max |H particles - H(rho)|", float(np.abs(traj_eq.saved["H"] - H_closed[:, None]).max())),
        ("equiangular", "monotone rise", int(np.all(np.diff(traj_eq.saved["H"][:, 0]) > 0))),
        ("equiangular", "log n - H(T)", float(np.log(n) - traj_eq.saved["H"][-1, 0])),
    ]
    return rows, (ts, traj.saved["H"], traj_eq.saved["H"][:, 0], H_closed, n)


def main(argv=None):
    args, out = parse(__doc__, argv)
    rows, (ts, Hg, He, Hc, n) = run(n=6, t1=6.0) if args.quick else run()
    print(write_table(out / "entropy.md", ["case", "quantity", "value"], rows))
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    a.plot(ts, Hg, lw=0.8)
    a.set(xlabel="t", ylabel="H_i (nat)", title="Generic data: per-token entropy, not monotone")
    b.plot(ts, He, label="particles")
    b.plot(ts, Hc, "--", label="closed form H(rho)")
    b.axhline(np.log(n), c="gray", ls=":", label="log n")
    b.set(xlabel="t", ylabel="H (nat)", title="Equiangular: rises to log n")
    b.legend()
    save_figure(fig, out / "entropy.png")
    return rows


if __name__ == "__main__":
    main()
