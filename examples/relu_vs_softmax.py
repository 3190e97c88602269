"""Theorem 25: ReLU clusters in O(n log(1/rho_0)), softmax in O(n), near rho = 0.

Equiangular tokens started at rho_0 (random data in R^d has rho_0 ~ d^{-1/2}, so the ReLU
time is O(n log d)). rho = 0 is an equilibrium of the ReLU flow and the linearisation
rho' ~ (2 beta sum lambda^2 / n) rho gives T_ReLU ~ n log(1/rho_0) / (2 beta sum lambda^2),
whereas softmax has rho'(0) > 0 and its time stays bounded as rho_0 -> 0. Times are
measured on particle runs (first time rho reaches rho_1) and compared with the
linearised law.

Run:  python examples/relu_vs_softmax.py --out outputs
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples._common import parse, pyplot, save_figure, write_table
from particles import MultiHead, SaveAt, simulate
from particles import theory as th


def time_to_reach(kind, n, rho0, rho1, lambdas=(1.0,), beta=1.0, dt=0.01):
    """First time the particles' ρ reaches rho1 (RK4, interpolated between saved steps)."""
    model = MultiHead.scalar(list(lambdas), d=n, beta=beta, kind=kind)
    T_guess = 2.0 * th.hitting_time(rho0, rho1, lambdas=lambdas, beta=beta, n=n, kind=kind)
    traj = simulate(th.equiangular_tokens(n, rho0), model, t1=T_guess, dt=dt, save=SaveAt(every=1),
                    method="rk4")
    G = np.einsum("tid,tjd->tij", traj.x[:, :1], traj.x[:, 1:2])[:, 0, 0]
    k = int(np.argmax(G >= rho1))
    return float(traj.t[k - 1] + (rho1 - G[k - 1]) / (G[k] - G[k - 1]) * (traj.t[k] - traj.t[k - 1]))


def run(n=8, rho1=0.5, rho0s=(1e-1, 1e-2, 1e-3, 1e-4)):
    rows = []
    for rho0 in rho0s:
        T_relu = time_to_reach("relu", n, rho0, rho1)
        T_soft = time_to_reach("softmax", n, rho0, rho1)
        rows.append((rho0, T_relu, th.relu_time_linear(rho0, lambdas=[1.0], beta=1.0, n=n), T_soft,
                     th.softmax_time_linear([1.0], beta=1.0, n=n)))
    return rows


def main(argv=None):
    args, out = parse(__doc__, argv)
    rows = run(n=6, rho0s=(1e-1, 1e-2)) if args.quick else run()
    print(write_table(out / "relu_vs_softmax.md",
                      ["rho_0", "T_ReLU particles", "n log(1/rho0)/(2 beta sum l^2)", "T_softmax particles",
                       "1/rho'(0) softmax"], rows))
    n = 6 if args.quick else 8
    # slope over the last decade, where the linearisation is accurate: law n/(2 beta sum l^2)
    slope = (rows[-1][1] - rows[-2][1]) / np.log(rows[-2][0] / rows[-1][0])
    print(f"dT_ReLU / dlog(1/rho0) over the last decade = {slope:.4f}; linearised law n/(2 beta sum l^2) = {n / 2:.4f}")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    r0 = np.array([r[0] for r in rows])
    ax.semilogx(r0, [r[1] for r in rows], "o-", label="ReLU (particles)")
    ax.semilogx(r0, [r[2] for r in rows], "--", label="ReLU linearised law")
    ax.semilogx(r0, [r[3] for r in rows], "s-", label="softmax (particles)")
    ax.invert_xaxis()
    ax.set(xlabel="rho_0", ylabel="time to rho = 0.5", title="ReLU O(n log 1/rho0) vs softmax O(n)")
    ax.legend()
    save_figure(fig, out / "relu_vs_softmax.png")
    return rows, slope


if __name__ == "__main__":
    main()
