"""Metastability on the circle at large beta: the energy staircase and its critical points.

One USA head on S^1 (rescaled time, log_time_scale="auto"), uniform random start. Tokens
gather into clusters fast, which then merge on times exp(beta (1 - cos theta)): E(t) and the
cluster count k(t) are staircases in log t. Each energy plateau is listed with its cluster
masses, the staircase identity 2 beta E / e^beta ~ sum_c m_c^2 and the exact energy of the
collapsed clusters. The state on the last plateau is then refined by Riemannian Newton to a
zero of the field, and the index of its Hessian (unstable directions) is compared with the
closed form of the antipodal configuration (two clusters of masses k/n and 1 - k/n).

Run:  python examples/metastability.py --out outputs
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples._common import parse, pyplot, save_figure, write_table
from metrics import n_clusters, plateaus, staircase
from particles import MultiHead, SaveAt, find_critical_point, sample_uniform, simulate


def antipodal_index(n, k, d, beta, lam=1.0):
    """Closed-form index of k tokens at p and n - k at -p (see particles.hessian_spectrum)."""
    b = beta * lam
    c_plus = lam / n**2 * (k * np.exp(b) - (n - k) * np.exp(-b))
    c_minus = lam / n**2 * ((n - k) * np.exp(b) - k * np.exp(-b))
    return (d - 1) * (1 + (k - 1) * (c_plus < 0) + (n - k - 1) * (c_minus < 0))


def main(argv=None):
    args, out = parse(__doc__, argv)
    beta, n, T = (6.0, 16, 3e3) if args.quick else (12.0, 32, 1e5)
    model = MultiHead.scalar([1.0], d=2, beta=beta, log_time_scale="auto")
    ts = np.concatenate([[0.0], np.logspace(-1, np.log10(T), 41 if args.quick else 81)])
    traj = simulate(sample_uniform(n, d=2, rng=1), model, t1=ts[-1], method="dopri5", rtol=1e-6, atol=1e-8,
                    save=SaveAt(ts=ts))
    steps = staircase(model, traj)
    counts = np.array([n_clusters(x) for x in traj.x])
    rows = [(f"energy plateau {i}", s.start, s.end, s.n_clusters, " ".join(f"{m:.3g}" for m in s.masses),
             s.sum_sq_masses, s.normalised_energy, s.cluster_energy / s.energy - 1) for i, s in enumerate(steps)]
    rows += [("cluster-count plateau", p.start, p.end, int(p.value), "", np.nan, np.nan, np.nan)
             for p in plateaus(traj.t, counts)]

    # the last plateau: refine to a critical point, classify it
    cp = find_critical_point(model, traj.x[-1])
    G = cp.x @ cp.x.T
    k = int(np.sum(G[0] > 0))
    antipodal = bool(np.allclose(np.abs(G), 1.0, atol=1e-8))
    expected = antipodal_index(n, k, 2, beta) if antipodal else -1
    rows.append(("Newton on last plateau", float(cp.residuals[0]), float(cp.residuals[-1]), cp.n_iter,
                 f"antipodal={int(antipodal)}, k={k}", float(cp.spectrum.index), float(expected), np.nan))
    print(write_table(out / "metastability.md",
                      ["row", "start / |F| before", "end / |F| after", "n_clusters / Newton iterations",
                       "masses / type", "sum m_c^2 / Hessian index", "2 beta E / e^beta / closed-form index",
                       "cluster energy rel. error"], rows))

    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    E = np.array([model.energy(x) for x in traj.x])
    a.semilogx(traj.t[1:], 2 * beta * E[1:] / np.exp(beta), label="2 beta E / e^beta")
    for s in steps:
        a.hlines(s.sum_sq_masses, s.start, s.end, colors="k", linestyles=":")
    a.set(xlabel="t (rescaled)", ylabel="normalised energy", title="Energy staircase (⋯ sum of m_c^2)")
    a.legend(fontsize=8)
    b.semilogx(traj.t[1:], counts[1:], drawstyle="steps-post")
    b.set(xlabel="t (rescaled)", ylabel="clusters (eps = 0.01)", title=f"Cluster count, n={n}, beta={beta:g}")
    save_figure(fig, out / "metastability.png")
    return steps, cp, expected


if __name__ == "__main__":
    main()
