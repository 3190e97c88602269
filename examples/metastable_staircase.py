"""The metastable staircase: energy plateaus at sum m_k^2, jumps 2 m_a m_b, closest pair first.

One USA head on S^1 at beta = 10 (rescaled time, log_time_scale="auto"), four clusters of
unequal masses at unequal spacings. In rescaled time a pair of clusters at angle theta merges
after ~ e^{beta (1 - cos theta)}, so the clusters merge one pair at a time, closest pair first,
and between merges the normalised energy 2 beta E / e^beta sits on a plateau at
sum_c m_c^2 + sum_{c != c'} m_c m_c' e^{-beta (1 - cos theta_cc')} (the cross terms are the
interaction of separated clusters). A merge of clusters a and b raises sum m_c^2 by
(m_a + m_b)^2 - m_a^2 - m_b^2 = 2 m_a m_b. The table lists each plateau (metrics.staircase),
the pair that merged into the next one, its angle and rank among the pair angles, the measured
energy jump and 2 m_a m_b.

Run:  python examples/metastable_staircase.py --out outputs
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples._common import parse, pyplot, save_figure, write_table
from metrics import cluster_labels, staircase
from particles import MultiHead, SaveAt, simulate

BETA = 10.0
CENTRES = np.array([0.0, 0.6, 1.5, 3.4])  # gaps 0.6, 0.9, 1.9, 2.88
COUNTS = np.array([4, 6, 8, 6])


def clusters_at(x, eps=1e-2):
    """Labels, masses and centre angles of the clusters of one state on S^1."""
    labels = cluster_labels(x, eps=eps)
    ks = np.unique(labels)
    masses = np.array([np.mean(labels == k) for k in ks])
    centres = np.array([np.angle(np.mean(x[labels == k, 0] + 1j * x[labels == k, 1])) for k in ks])
    return labels, masses, centres


def cross_terms(masses, centres, beta=BETA):
    """sum_{c != c'} m_c m_c' e^{-beta (1 - cos(theta_c - theta_c'))}."""
    c = np.cos(centres[:, None] - centres[None, :])
    w = masses[:, None] * masses[None, :] * np.exp(-beta * (1 - c))
    return float(w.sum() - np.trace(w))


def _gap(centres, p, q):
    """Angle between the centres of clusters p and q."""
    return abs(np.angle(np.exp(1j * (centres[p] - centres[q]))))


def merges(traj, steps, beta=BETA):
    """For consecutive plateaus: the merged pair (a, b), its angle, its rank among pair angles,
    the jump of the normalised energy and of sum m^2, and the cross terms (at ``beta``) of both plateaus."""
    out = []
    mids = [int(np.argmin(np.abs(traj.t - np.sqrt(s.start * s.end)))) for s in steps]
    for i in range(len(steps) - 1):
        lab0, m0, c0 = clusters_at(traj.x[mids[i]])
        lab1, _, _ = clusters_at(traj.x[mids[i + 1]])
        # clusters of plateau i whose tokens share a label on plateau i + 1
        target = np.array([np.bincount(lab1[lab0 == k]).argmax() for k in range(len(m0))])
        vals, cnt = np.unique(target, return_counts=True)
        a, b = np.nonzero(target == vals[cnt == 2][0])[0]
        angles = sorted(_gap(c0, p, q) for p in range(len(m0)) for q in range(p + 1, len(m0)))
        _, m1, c1 = clusters_at(traj.x[mids[i + 1]])
        out.append({"plateau": i, "masses": (m0[a], m0[b]), "angle": _gap(c0, a, b),
                    "rank": angles.index(_gap(c0, a, b)),
                    "energy_jump": steps[i + 1].normalised_energy - steps[i].normalised_energy,
                    "sumsq_jump": steps[i + 1].sum_sq_masses - steps[i].sum_sq_masses,
                    "two_ab": 2 * m0[a] * m0[b], "cross": (cross_terms(m0, c0, beta), cross_terms(m1, c1, beta))})
    return out


def main(argv=None):
    args, out = parse(__doc__, argv)
    rng = np.random.default_rng(0)
    theta = np.concatenate([c + 1e-3 * rng.standard_normal(k) for c, k in zip(CENTRES, COUNTS)])
    x0 = np.stack([np.cos(theta), np.sin(theta)], axis=-1)
    model = MultiHead.scalar([1.0], d=2, beta=BETA, log_time_scale="auto")
    ts = np.concatenate([[0.0], np.logspace(-2, 2.7 if args.quick else 3.5, 48 if args.quick else 81)])
    traj = simulate(x0, model, t1=ts[-1], method="dopri5", rtol=1e-8, atol=1e-10, save=SaveAt(ts=ts))
    steps = staircase(model, traj)
    found = merges(traj, steps)
    rows = [(i, s.start, s.end, s.n_clusters, " ".join(f"{m:.4g}" for m in s.masses), s.sum_sq_masses,
             s.normalised_energy) for i, s in enumerate(steps)]
    print(write_table(out / "metastable_staircase.md", ["plateau", "start", "end", "clusters", "masses",
                                                        "sum m_c^2", "2 beta E / e^beta"], rows))
    rows = [(f["plateau"], f"{f['masses'][0]:.4g} + {f['masses'][1]:.4g}", f["angle"], f["rank"], f["energy_jump"],
             f["two_ab"], f["sumsq_jump"]) for f in found]
    print(write_table(out / "metastable_merges.md", ["after plateau", "merged masses", "angle", "rank (0 = closest)",
                                                     "energy jump", "2 m_a m_b", "jump of sum m^2"], rows))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    E = np.array([model.energy(x) for x in traj.x])
    ax.semilogx(traj.t[1:], 2 * BETA * E[1:] / np.exp(BETA), label="2 beta E / e^beta")
    for s in steps:
        ax.hlines(s.sum_sq_masses, s.start, s.end, colors="k", linestyles=":")
    ax.set(xlabel="t (rescaled)", ylabel="normalised energy", title="staircase (dotted: sum m_c^2)")
    ax.legend()
    save_figure(fig, out / "metastable_staircase.png")
    return steps, found


if __name__ == "__main__":
    main()
