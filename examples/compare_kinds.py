"""Five attention kinds on the same tokens: softmax, USA, ReLU, sigmoid and Sinkhorn.

One head M = W = I on S^2, n tokens drawn once, every kind run with the same adaptive stepper (dopri5)
and save times:
the number of clusters (ε-components, eps = 1e-2) and each kind's own energy against time, where it has
one (USA: E_multi; sigmoid: the softplus energy; Sinkhorn, converged: -OT/(2 beta); softmax and ReLU: the
exponential energy E_multi, which they need not raise), and one row of a phase diagram: the clusters
left at t1 against beta. Sigmoid attention takes b = -log n; Sinkhorn attention 3 normalisations
(docs/theory.md §1-§2).

Run:  python examples/compare_kinds.py --out outputs
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples._common import parse, pyplot, save_figure, write_table
from metrics import n_clusters
from particles import MultiHead, SaveAt, Sigmoid, Sinkhorn, sample_uniform, simulate

#: the kinds compared: a name, or a kind object with its parameters
KINDS = {"softmax": "softmax", "usa": "usa", "relu": "relu", "sigmoid": Sigmoid(), "sinkhorn": Sinkhorn(iterations=3)}


def _energy(model, x):
    """The kind's own energy where it has one, else E_multi."""
    return float(model.attention.energy(model, x)) if model.attention.has_energy else model.energy(x)


def run(n=32, beta=2.0, t1=8.0, n_saves=17, betas=(0.5, 1.0, 2.0, 4.0), seed=0, dt=0.05):
    x0 = sample_uniform(n, d=3, rng=seed)
    ts = np.linspace(0.0, t1, n_saves)
    curves, rows = {}, []
    for label, kind in KINDS.items():
        model = MultiHead(np.eye(3), beta=beta, kind=kind)
        traj = simulate(x0, model, t1=t1, dt=dt, method="dopri5", save=SaveAt(ts=ts))
        clusters = [n_clusters(x, eps=1e-2) for x in traj.x]
        energy = [_energy(model, x) for x in traj.x]
        curves[label] = (ts, clusters, energy)
        finals = [n_clusters(simulate(x0, model.replace(beta=b), t1=t1, dt=dt, method="dopri5").x[-1], eps=1e-2)
                  for b in betas]
        rows.append((label, clusters[0], clusters[-1], energy[0], energy[-1], *finals))
    return rows, curves, betas


def main(argv=None):
    args, out = parse(__doc__, argv)
    rows, curves, betas = run(n=12, t1=2.0, n_saves=5, betas=(1.0, 4.0)) if args.quick else run()
    header = ["kind", "clusters t=0", "clusters t1", "energy t=0", "energy t1", *[f"clusters t1, beta={b:g}"
                                                                                 for b in betas]]
    print(write_table(out / "compare_kinds.md", header, rows))
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for label, (ts, clusters, energy) in curves.items():
        axes[0].plot(ts, clusters, label=label)
        axes[1].plot(ts, np.asarray(energy) / energy[0], label=label)
    for row in rows:
        axes[2].plot(betas, row[5:], "o-", label=row[0])
    axes[0].set(xlabel="t", ylabel="clusters (eps = 1e-2)", title="clusters against time")
    axes[1].set(xlabel="t", ylabel="energy / energy at t = 0", title="each kind's energy")
    axes[2].set(xscale="log", xlabel="beta", ylabel="clusters at t1", title="one phase-diagram row")
    axes[2].set_xticks(betas, [f"{b:g}" for b in betas])
    axes[2].minorticks_off()
    axes[0].legend(fontsize=8)
    save_figure(fig, out / "compare_kinds.png")
    return rows


if __name__ == "__main__":
    main()
