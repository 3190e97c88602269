"""Theorem 19: the critical inverse temperature beta*(H) and radial dominance.

Orthogonal tokens, H equal scalar heads of strength alpha (USA and softmax alike). The
particle diagnostics give the cosine between each head output f_i^h and its token x_i and
the radial-dominance margin; the closed form says cos = c*(H) exactly at beta*, and the
margin changes sign there. One row per H: beta*, the simulated cosine at beta*, c*(H), and
the margins just below and above beta*.

Run:  python examples/critical_beta.py --out outputs
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples._common import parse, pyplot, save_figure, write_table
from particles import MultiHead, diagnose
from particles import theory as th


def run(n=24, alpha=1.0, Hs=(2, 3, 4)):
    x = th.orthogonal_tokens(n, rng=0)
    rows, curves = [], {}
    for H in Hs:
        bstar = th.beta_star(H, n=n, alpha=alpha)
        betas = np.linspace(0.0, 2 * bstar, 41)
        diags = [diagnose(MultiHead.scalar([alpha] * H, d=n, beta=b), x, include=["rd_margin_min", "cos_angle"])
                 for b in betas]
        margin = np.array([dg["rd_margin_min"].min() for dg in diags])
        cos = np.array([dg["cos_angle"].mean() for dg in diags])
        curves[H] = (betas, cos, margin)
        at = diagnose(MultiHead.scalar([alpha] * H, d=n, beta=bstar), x)
        below = diagnose(MultiHead.scalar([alpha] * H, d=n, beta=0.99 * bstar), x)["rd_margin_min"].min()
        above = diagnose(MultiHead.scalar([alpha] * H, d=n, beta=1.01 * bstar), x)["rd_margin_min"].min()
        rows.append((H, bstar, float(at["cos_angle"].mean()), th.c_star(H),
                     float(np.abs(at["cos_angle"] - th.c_star(H)).max()), float(below), float(above)))
    return rows, curves


def main(argv=None):
    args, out = parse(__doc__, argv)
    n = 12 if args.quick else 24  # beta*(H=4) > 0 needs n >= 11
    rows, curves = run(n=n)
    table = write_table(out / "critical_beta.md",
                        ["H", "beta*", "cos at beta* (particles)", "c*(H)", "max |cos - c*|",
                         "margin at 0.99 beta*", "margin at 1.01 beta*"], rows)
    print(table)
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    for H, (betas, cos, margin) in curves.items():
        bstar = th.beta_star(H, n=n, alpha=1.0)
        a.plot(betas / bstar, cos, label=f"H={H}")
        a.axhline(th.c_star(H), ls=":", c="gray")
        b.plot(betas / bstar, margin / np.abs(margin).max(), label=f"H={H}")
    a.axvline(1, c="k", lw=0.8)
    b.axvline(1, c="k", lw=0.8)
    b.axhline(0, c="gray", lw=0.8)
    a.set(xlabel="beta / beta*", ylabel="cos angle(f_i^h, x_i)", title="cos = c*(H) at beta*")
    b.set(xlabel="beta / beta*", ylabel="min RD margin (scaled)", title="Radial dominance iff beta <= beta*")
    a.legend()
    save_figure(fig, out / "critical_beta.png")
    return rows


if __name__ == "__main__":
    main()
