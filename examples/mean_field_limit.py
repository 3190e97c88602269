"""The n -> infinity study on S^1 and S^2: particles against the mean-field solution.

S^1: two softmax heads (beta = 2) from the density 1 + 0.5 cos(theta); the mean-field
equation is solved once by the spectral scheme (the study's reference="auto"; its band limit,
spectral tail and error bound are in the dataset attrs), then for n = 10^2 ... 10^6 tokens
(40 seeds at n = 10^2 and 10^3, 20, 10 and 5 beyond: the small-n cells are cheap and their
log-gaps as noisy as the large-n ones) drawn i.i.d. from the same law we run the particle flow (summation="auto", so the
O(n log n) NUFFT sums) and measure the exact W1 and W2 against the reference through POT
(ot.emd2 for small n, ot.binary_search_circle beyond).
S^2: one USA head, the sliced W_2 of the embedded measures (directions from POT) against the
spectral solution on a Gauss-Legendre grid, whose projected CDFs are exact
(metrics.spectral_reference.SpectralSlicedReference); n_reference only matters for the Lagrangian
fallback (reference="lagrangian", or non-zonal data in d >= 4).
S^7: one USA head, a density zonal about the last axis (1 + 0.5 y_8), n = 10^2 .. 10^5, against the
Gegenbauer spectral reference; one step of length 0.05 (no fast summation in d = 8).
docs/theory.md §6 predicts W(mu_n(0), mu(0)) ~ n^{-1/2}. Writes mean_field_limit_s1.nc,
mean_field_limit_s2.nc, mean_field_limit_s7.nc, a table and a log-log figure (metrics.plot_limit_study) with
standard-error bars and the fitted slopes with their t intervals. Cells are stored under OUT/cells_*, so a killed
run resumes.

Run:  python examples/mean_field_limit.py --out outputs          (full)
      python examples/mean_field_limit.py --out outputs --quick  (seconds)
"""

from __future__ import annotations

import pathlib
import sys

import metrics

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples._common import parse, pyplot, save_figure, write_table
from particles import MultiHead


def _save(ds, path):
    tmp = path.with_name(path.name + ".part")
    ds.to_netcdf(tmp)
    tmp.replace(path)


def density_s1(x):
    """Initial density 1 + 0.5 cos(theta) on S^1 (unnormalised), of points (m, 2); module level so
    worker processes can unpickle it."""
    return 1 + 0.5 * x[:, 0]


def density_s2(y):
    """Initial density on S^2 (unnormalised), of points (m, 3)."""
    return 1 + 0.5 * y[:, 2]


def density_zonal(y):
    """Initial density on S^{d-1} (unnormalised), zonal about the last axis: 1 + 0.5 y_d."""
    return 1 + 0.5 * y[:, -1]


def main(argv=None):
    args, out = parse(__doc__, argv)
    quick = args.quick
    # the full study spreads its (n, seed) cells over the machine's two cores
    pool = {} if quick else {"engine": "process", "max_workers": 2}
    model1 = MultiHead.scalar([1.0, 0.5], d=2, beta=2.0, kind="softmax")
    ds = metrics.mean_field_limit_study(
        model1, density_s1,
        n_values=(64, 256, 1024) if quick else (100, 1000, 10_000, 100_000, 1_000_000),
        n_seeds=8 if quick else (40, 40, 20, 10, 5), t1=0.5 if quick else 1.0, n_saves=2 if quick else 6,
        m_grid=256 if quick else 4096, dt=0.05, store=out / "cells_s1", progress=not quick, **pool)
    _save(ds, out / "mean_field_limit_s1.nc")
    model2 = MultiHead.scalar([1.0], d=3, beta=1.0, kind="usa")
    ds2 = metrics.mean_field_limit_study(
        model2, density_s2,
        n_values=(64, 256) if quick else (100, 1000, 10_000, 100_000, 1_000_000),
        n_seeds=4 if quick else (40, 40, 20, 10, 5), t1=0.5 if quick else 1.0, n_saves=2 if quick else 6,
        m_grid=256, dt=0.05, n_reference=1024 if quick else 400_000, n_projections=32 if quick else 256,
        store=out / "cells_s2", progress=not quick, **pool)
    _save(ds2, out / "mean_field_limit_s2.nc")
    # S^7, zonal data: the Gegenbauer spectral reference; no fast summation in d = 8, so one short step
    # (the n^-1/2 law is a statement at t = 0; the step checks the flow and the reference agree)
    model8 = MultiHead.scalar([1.0], d=8, beta=1.0, kind="usa")
    ds8 = metrics.mean_field_limit_study(
        model8, density_zonal, n_values=(64, 256) if quick else (100, 1000, 10_000, 100_000),
        n_seeds=2 if quick else (20, 20, 10, 5), t1=0.05, n_saves=2, dt=0.05, n_projections=32 if quick else 256,
        store=out / "cells_s7", progress=not quick, **pool)
    _save(ds8, out / "mean_field_limit_s7.nc")
    w1 = ds.w1.mean("seed")
    rows = [(int(n), *[float(v) for v in w1.sel(n_particles=n).values]) for n in ds.n_particles.values]
    write_table(out / "mean_field_limit.md", ["n"] + [f"W1 at t={t:g}" for t in ds.time.values], rows)
    print(f"S^1 ({ds.attrs['study_seconds']:.0f} s)\n{metrics.limit_study_table(ds)}  (theory: n^-0.5)")
    print(f"S^2 ({ds2.attrs['study_seconds']:.0f} s)\n{metrics.limit_study_table(ds2)}  (theory: n^-0.5)")
    print(f"S^7 zonal ({ds8.attrs['study_seconds']:.0f} s)\n{metrics.limit_study_table(ds8)}  (theory: n^-0.5)")
    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(20, 4.6))
    metrics.plot_limit_study(ds, "w1", ax=axes[0])
    metrics.plot_limit_study(ds, "energy_gap", ax=axes[1], guide=False)
    metrics.plot_limit_study(ds2, "sw2", ax=axes[2])
    metrics.plot_limit_study(ds8, "sw2", ax=axes[3])
    save_figure(fig, out / "mean_field_limit.png")
    return ds


if __name__ == "__main__":
    main()
