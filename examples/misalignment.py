"""Theorem 12 (value misalignment) and Theorems 39-40 (approximate orthogonality) along runs.

(1) USA heads with symmetric M_h and values W_h = M_h + eps * G_h (G_h Gaussian): along one
trajectory per eps, the exact split dE/dt = (1/n) sum |x_i'|^2 - (1/n^2) sum <D_i, x_i'>
(residual), the measured rate against the speed bound (1/n) sum |x_i'|(|x_i'| - delta_V)
and the unconditional bound -delta_V^2/4, and how often every token outruns delta_V.
(2) Two heads on complementary coordinate blocks, the second rotated by theta: the defect
delta = max |M_h^T M_k|, and the per-head rates against the bound that degrades with delta.

Run:  python examples/misalignment.py --out outputs
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples._common import parse, pyplot, save_figure, write_table
from particles import (
    MultiHead,
    SaveAt,
    head_rate_bounds_fn,
    misaligned_model,
    misalignment_fn,
    sample_uniform,
    simulate,
)


def rotated_heads(theta, scale=1.5):
    """M_1 on coordinates {0, 1}, M_2 on {2, 3} rotated by theta in the (1, 2) plane."""
    M1 = scale * np.diag([1.0, 0.6, 0.0, 0.0])
    M2 = scale * np.diag([0.0, 0.0, 1.0, 0.8])
    R = np.eye(4)
    R[1, 1] = R[2, 2] = np.cos(theta)
    R[1, 2], R[2, 1] = -np.sin(theta), np.sin(theta)
    return np.array([M1, R @ M2 @ R.T])


def misalignment_rows(n, t1, n_saves, epsilons, rng):
    d, H = 3, 2
    A = rng.standard_normal((H, d, d))
    M = 0.6 * (A + A.transpose(0, 2, 1)) / 2
    G = rng.standard_normal((H, d, d))
    x0 = sample_uniform(n, d=d, rng=rng)
    ts = np.linspace(0, t1, n_saves)
    rows, curves = [], {}
    for eps in epsilons:
        model = misaligned_model(M, eps * G, beta=1.0)
        s = simulate(x0, model, t1=t1, dt=0.02, save=SaveAt(ts=ts, x=False, fn=misalignment_fn(model))).saved
        curves[eps] = s
        rows.append((f"Thm 12, eps = {eps:g}", float(s["delta_v"][0]), float(s["energy_rate"].min()),
                     float((s["energy_rate"] - s["speed_bound"]).min()), float(s["uniform_bound"][0]),
                     float(s["certified"].mean()), float(np.abs(s["split_residual"]).max())))
    return rows, ts, curves


def orthogonality_rows(n, t1, n_saves, thetas, rng):
    x0 = sample_uniform(n, d=4, rng=rng)
    ts = np.linspace(0, t1, n_saves)
    rows, curves = [], {}
    for theta in thetas:
        model = MultiHead(rotated_heads(theta), beta=0.8)
        s = simulate(x0, model, t1=t1, dt=0.02, save=SaveAt(ts=ts, x=False, fn=head_rate_bounds_fn(model))).saved
        curves[theta] = s
        rows.append((f"Thm 39-40, theta = {theta:g}", float(s["delta"][0]), float(s["rate"].min()),
                     float((s["rate"] - s["bound"]).min()), float((s["orthogonal_part"] - s["bound"]).max()),
                     float(s["certified"].mean()), float(np.abs(s["rate"] - s["orthogonal_part"]).max())))
    return rows, ts, curves


def main(argv=None):
    args, out = parse(__doc__, argv)
    rng = np.random.default_rng(12)
    n, t1, n_saves = (8, 1.0, 11) if args.quick else (24, 6.0, 61)
    rows1, ts1, c1 = misalignment_rows(n, t1, n_saves, (0.0, 0.01, 0.1, 1.0), rng)
    rows2, ts2, c2 = orthogonality_rows(n, t1, n_saves, (0.0, 0.02, 0.2, 0.8), rng)
    header = ["run", "delta_V / delta", "min dE/dt", "min (rate - bound)", "-delta_V^2/4 / max slack",
              "fraction certified", "split residual / |rate - orthogonal part|"]
    print(write_table(out / "misalignment.md", header, rows1 + rows2))
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    for eps, s in c1.items():
        line, = a.plot(ts1, s["energy_rate"], label=f"eps={eps:g}")
        a.plot(ts1, s["local_bound"], ":", c=line.get_color())
    a.set(xlabel="t", ylabel="dE/dt", title="Theorem 12: rate (—) and local bound (⋯)")
    # linear within 1e-3 of the largest |rate|, logarithmic beyond: the decades the rates span are seen
    top = max(float(np.nanmax(np.abs(s[k]))) for s in c1.values() for k in ("energy_rate", "local_bound"))
    a.set_yscale("symlog", linthresh=max(1e-3 * top, 1e-300))
    a.legend(fontsize=8)
    for theta, s in c2.items():
        line, = b.plot(ts2, s["rate"][:, 0], label=f"theta={theta:g}")
        b.plot(ts2, s["bound"][:, 0], ":", c=line.get_color())
    b.set(xlabel="t", ylabel="dE_1/dt", title="Theorems 39-40: head-1 rate (—) and bound (⋯)")
    b.legend(fontsize=8)
    save_figure(fig, out / "misalignment.png")
    return rows1, rows2


if __name__ == "__main__":
    main()
