"""Equiangular tokens: particle runs against the reduced ODE of every attention kind.

Equiangular data <x_i, x_j> = rho stays equiangular under scalar heads, and rho solves
one ODE (docs/theory.md §4) for softmax, USA, ReLU and row-normalised ReLU heads. We integrate
the particles with RK4 (dt = 1e-3) and the ODE with DOP853 (rtol 1e-13) and report the
largest gap; at beta = 0 the softmax solution is also checked against its closed form.

Run:  python examples/equiangular.py --out outputs
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

KINDS = ("softmax", "usa", "relu", "relu_rownorm")



def run(n=6, lambdas=(1.0, 0.5), beta=1.5, rho0=0.05, t1=4.0, dt=1e-3):
    ts = np.linspace(0, t1, 41)
    x0 = th.equiangular_tokens(n, rho0)
    rows, curves = [], {}
    for kind in KINDS:
        model = MultiHead.scalar(list(lambdas), d=n, beta=beta, kind=kind)
        traj = simulate(x0, model, t1=t1, dt=dt, save=SaveAt(ts=ts))
        rho_p = np.array([th.mean_rho(x) for x in traj.x])
        rho_o = th.solve_equiangular(rho0, ts, lambdas=lambdas, beta=beta, n=n, kind=kind)
        curves[kind] = (ts, rho_p, rho_o)
        rows.append((kind, beta, float(rho_p[-1]), float(np.abs(rho_p - rho_o).max())))
    Lam = float(sum(lambdas))
    model0 = MultiHead.scalar(list(lambdas), d=n, beta=0.0, kind="softmax")
    traj0 = simulate(th.orthogonal_tokens(n), model0, t1=t1, dt=dt, save=SaveAt(ts=ts))
    rho_p0 = np.array([th.mean_rho(x) for x in traj0.x])
    rows.append(("softmax, beta=0 closed form", 0.0, float(rho_p0[-1]),
                 float(np.abs(rho_p0 - th.rho_beta0(ts, Lambda=Lam, n=n)).max())))
    curves["softmax beta=0"] = (ts, rho_p0, th.rho_beta0(ts, Lambda=Lam, n=n))
    return rows, curves


def main(argv=None):
    args, out = parse(__doc__, argv)
    rows, curves = run(t1=1.0 if args.quick else 4.0)
    print(write_table(out / "equiangular.md", ["kind", "beta", "rho(T) particles", "max |particles - ODE|"], rows))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for kind, (ts, rp, ro) in curves.items():
        ax.plot(ts, ro, label=f"{kind} (ODE)")
        ax.plot(ts[::4], rp[::4], "o", ms=3, c=ax.lines[-1].get_color())
    ax.set(xlabel="t", ylabel="rho(t)", title="Equiangular reduction: ODE (lines) vs particles (dots)")
    ax.legend(fontsize=8)
    save_figure(fig, out / "equiangular.png")
    return rows


if __name__ == "__main__":
    main()
