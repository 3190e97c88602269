"""Linear stability of the uniform measure on S^{d-1}: Funk-Hecke growth rates per degree l.

sigma_l = l(l+d-2) (sum_h mu_h G_h(l) - 1/kappa) with G(l) from the Funk-Hecke coefficient of
exp(a t) (a Bessel function of order l + (d-2)/2). Checks: (1) on S^2 the finite-volume solver
grows a single harmonic (degree 1 and 2, with and without noise, on both sides of kappa*) at
sigma_l; (2) on S^1, S^2 and S^3 the mean-field velocity of sigma + eps Y_l computed by product
quadrature equals eps G(l) grad Y_l (exact for USA heads). The figure shows sigma_l against l
for several d, and the measured amplitudes against exp(sigma_l t).

Run:  python examples/sphere_stability.py --out outputs
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import meanfield as mf
from examples._common import parse, pyplot, save_figure, write_table
from particles import MultiHead, sample_uniform

P1 = lambda y: y[:, 2]  # noqa: E731
P2 = lambda y: 1.5 * y[:, 2] ** 2 - 0.5  # noqa: E731


def velocity_response(d, n_quad, kind, rng):
    """Measured G(2) from v[sigma + eps x_1 x_2] on a product quadrature, and the Funk-Hecke value."""
    pts, w = mf.sphere_quadrature(d, n=n_quad)
    model = MultiHead.scalar([1.5], d=d, beta=1.0, kind=kind)
    eps = 0.5 if kind == "usa" else 1e-5
    weights = w * (1 + eps * pts[:, 0] * pts[:, 1])
    q = sample_uniform(5, d=d, rng=rng)
    v = mf.measure_velocity(model, pts, weights / weights.sum(), at=q)
    e = np.eye(d)
    grad = q[:, 1:2] * e[0] + q[:, 0:1] * e[1] - 2 * (q[:, 0] * q[:, 1])[:, None] * q
    measured = float(np.sum(v * grad) / (eps * np.sum(grad * grad)))
    return measured, float(mf.growth_rates(model, l_max=2)[2] / (2 * d))


def main(argv=None):
    args, out = parse(__doc__, argv)
    rng = np.random.default_rng(6)
    m = 300 if args.quick else 1200
    rows, curves = [], []
    beta = 1.5
    kstar = mf.critical_kappa(beta, lam=1.0, kind="softmax", d=3)
    runs = [("usa", np.inf, 1, P1), ("usa", np.inf, 2, P2), ("softmax", np.inf, 2, P2),
            ("softmax", 0.7 * kstar, 1, P1), ("softmax", 1.4 * kstar, 1, P1)]
    for kind, kappa, l, Y in runs:
        model = MultiHead.scalar([1.0], d=3, beta=beta, kind=kind)
        t, amp, rate = mf.harmonic_growth(model, Y, m=m, t1=0.3, n_saves=4, kappa=kappa)
        sigma = float(mf.growth_rates(model, l_max=l, kappa=kappa)[l])
        rows.append((f"S^2 fv_sphere {kind}, kappa={kappa:.3g}, l={l}", rate, sigma, rate / sigma - 1))
        curves.append((f"{kind} l={l} kappa={kappa:.2g}", t, amp / amp[0], sigma))
    for d, n_quad in ((2, 64), (3, 24), (4, 10)):
        for kind in ("usa", "softmax"):
            measured, G = velocity_response(d, n_quad, kind, rng)
            rows.append((f"S^{d - 1} velocity response {kind}, l=2", measured, G, measured / G - 1))
    print(write_table(out / "sphere_stability.md",
                      ["check", "measured (rate or G)", "Funk-Hecke", "relative error"], rows))

    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    ls = np.arange(0, 9)
    for d in (2, 3, 4, 8):
        model = MultiHead.scalar([1.0], d=d, beta=2.0, kind="softmax")
        a.plot(ls, mf.growth_rates(model, l_max=8), "o-", label=f"d={d}, no noise")
        a.plot(ls, mf.growth_rates(model, l_max=8, kappa=3.0), "x:", c=a.lines[-1].get_color())
    a.axhline(0, c="gray", lw=0.8)
    a.set(xlabel="degree l", ylabel="sigma_l", title="Funk-Hecke rates (softmax, beta=2; ':' kappa=3)")
    a.legend(fontsize=8)
    for label, t, amp, sigma in curves:
        line, = b.semilogy(t, amp, "o", label=label)
        b.semilogy(t, np.exp(sigma * t), ":", c=line.get_color())
    b.set(xlabel="t", ylabel="amplitude / initial", title=r"$S^2$ finite volumes (o) vs $\exp(\sigma_l t)$")
    b.legend(fontsize=7)
    save_figure(fig, out / "sphere_stability.png")
    return rows


if __name__ == "__main__":
    main()
