"""The n -> infinity study on S^1: particles against the mean-field solution.

One softmax head (M = W = I, beta = 2) from the density 1 + 0.5 cos(theta). The mean-field
equation is solved once by finite volumes (1024 cells); for n = 16 ... 1024 tokens drawn
i.i.d. from the same law we run the particle flow and measure W1 and W2 (POT, exact,
geodesic cost) between mu_n(t) and mu(t). docs/theory.md §6 predicts W1(mu_n(0), mu(0)) ~ n^{-1/2}
on S^1. Writes mean_field_limit.nc, a table and a figure of the rate.

Run:  python examples/mean_field_limit.py --out outputs
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

import metrics

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples._common import parse, pyplot, save_figure, write_table
from particles import MultiHead


def main(argv=None):
    args, out = parse(__doc__, argv)
    model = MultiHead.scalar([1.0], d=2, beta=2.0, kind="softmax")
    n_values = (16, 32, 64) if args.quick else (16, 32, 64, 128, 256, 512, 1024)
    ds = metrics.mean_field_limit_study(model, lambda th: 1 + 0.5 * np.cos(th), n_values=n_values,
                                        n_seeds=2 if args.quick else 4, t1=2.0, n_saves=5,
                                        m_grid=256 if args.quick else 1024)
    tmp = out / "mean_field_limit.nc.part"
    ds.to_netcdf(tmp)
    tmp.replace(out / "mean_field_limit.nc")
    w1 = ds.w1.mean("seed")
    rows = [(int(n), *[float(v) for v in w1.sel(n_particles=n).values]) for n in ds.n_particles.values]
    print(write_table(out / "mean_field_limit.md", ["n"] + [f"W1 at t={t:g}" for t in ds.time.values], rows))
    print(f"fitted rate of W1 at t=0: n^{ds.attrs['w1_rate_at_t0']:.3f}   (theory: n^-0.5)")
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    n = ds.n_particles.values
    for t in ds.time.values:
        a.loglog(n, w1.sel(time=t), "o-", label=f"t={t:g}")
    a.loglog(n, float(w1.isel(time=0)[0]) * (n / n[0]) ** -0.5, "k--", label="n^-1/2")
    a.set(xlabel="n", ylabel="W1(mu_n(t), mu(t))", title="Mean-field limit on S^1")
    a.legend(fontsize=8)
    for k in n:
        b.semilogy(ds.time, w1.sel(n_particles=k), label=f"n={k}")
    b.set(xlabel="t", ylabel="W1", title="Gap along the flow")
    b.legend(fontsize=8)
    save_figure(fig, out / "mean_field_limit.png")
    return ds


if __name__ == "__main__":
    main()
