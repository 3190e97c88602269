"""How long the mean field holds: breakdown of n uniform tokens, its log n horizon and the mode that wins.

(a) Unstable S^1: one softmax head, beta = 0.5 (sigma_1 = 0.485, about 2 sigma_2), no noise, n = 10^3 .. 10^6
    i.i.d. uniform tokens, 48/24/12/6 seeds per n (the slope of t_delta against log n is fitted over all
    runs). The uniform state is stationary for the mean field, so W1(mu_n(t), uniform) is the distance to
    the mean-field solution. Figures: W(t) per n; the same curves against t - log(n)/(2 sigma*)
    (they collapse); t_delta against log n with the predicted line (slope 1/(2 sigma*)); the mode spectrum at
    breakdown; measured against predicted t_delta per run; the cluster count at t1 against l*.
(b) Stable S^1: the same head with noise kappa = 0.8 kappa*: sup_t sqrt(n) W(t) stays bounded in n.
(c) S^2: two softmax heads lambda = (1, -1), beta = 4 (odd degrees cancel, l* = 2, sigma_2 = 1.66 sigma_4),
    n up to 10^5, the sliced SW2 to the uniform measure.
Theory: metrics.horizon and docs/theory.md ("How long the mean field holds"). Writes chaos_horizon_*.nc,
chaos_horizon.md (a table) and chaos_horizon_*.png; cells are stored under OUT/cells_*, so a killed run resumes.

Run:  python examples/chaos_horizon.py --out outputs          (full, process engine on 2 cores)
      python examples/chaos_horizon.py --out outputs --quick  (under a minute)
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

import meanfield as mf
import metrics

# run as a script (python examples/x.py) or as a module (python -m examples.x)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from examples._common import parse, pyplot, save_figure, write_table
from particles import MultiHead

BETA_S1 = 0.5
QUICK = {
    # delta above the initial fluctuation of n = 100 (sqrt(n) A_1(0) is Rayleigh: P(A_1(0) > 0.3) = e^-4.5)
    "unstable": {"n_values": [100, 1000], "n_seeds": 4, "t1": 10.0, "n_saves": 81, "delta": [0.3, 0.4], "dt": 0.05},
    "stable": {"n_values": [100, 1000], "n_seeds": 2, "t1": 4.0, "n_saves": 21, "delta": [0.6], "dt": 0.02},
    "s2": {"n_values": [100, 300], "n_seeds": 2, "t1": 3.0, "n_saves": 31, "delta": [0.5], "dt": 0.05},
}
# seeds per n: t_delta spreads by ~1.3 time units at every n, so the slope's interval is set by the
# spread of log n over the runs; the n = 10^6 runs on S^1 cost ~6 min each (RK4, dt = 0.1: sigma* dt ~ 0.05),
# the n = 10^5 runs on S^2 ~10 min each (two heads, 120 steps): two of them keep the whole run under 45 min
FULL = {
    "unstable": {"n_values": [1000, 10_000, 100_000, 1_000_000], "n_seeds": (48, 24, 12, 6), "t1": 16.0,
                 "n_saves": 161, "delta": [0.05, 0.1], "dt": 0.1},
    "stable": {"n_values": [1000, 10_000, 100_000], "n_seeds": 4, "t1": 14.0, "n_saves": 71, "delta": [0.6],
               "dt": 0.02},
    "s2": {"n_values": [1000, 10_000, 100_000], "n_seeds": (24, 12, 2), "t1": 6.0, "n_saves": 121, "delta": [0.2],
           "dt": 0.05},
}


def _save(ds, path):
    tmp = path.with_name(path.name + ".part")
    ds.to_netcdf(tmp)
    tmp.replace(path)


def _params(ds):
    """One line of the run's parameters, for figure titles."""
    k = ds.attrs["kappa"]
    return (f"{ds.attrs['kind']} H={ds.attrs['n_heads']} beta={ds.attrs['beta']:g} on S^{ds.attrs['d'] - 1}, "
            f"kappa={'inf' if np.isinf(k) else f'{k:.3g}'}, sigma*={float(ds.sigma_star):.3f}, l*={int(ds.l_star)}, "
            f"seeds={ds.sizes['seed']}, dt={ds.attrs['dt']:g}")


def _unstable_figure(ds, path):
    plt = pyplot()
    d0 = float(ds.delta[-1])
    fig, ax = plt.subplots(2, 3, figsize=(16, 9))
    n = ds.n_particles.values
    ds.attn.plot_chaos_collapse(ax=ax[0, 0], collapse=False).set_title("distance to the mean field")
    ds.attn.plot_chaos_collapse(ax=ax[0, 1]).set_title("collapse")  # W ~ e^{sigma* (t - log(n) / (2 sigma*))}
    ds.attn.plot_chaos_horizon(d0, ax=ax[0, 2])
    td = ds.t_delta.sel(delta=d0)
    idx = np.minimum(np.searchsorted(ds.time.values, td.values), ds.sizes["time"] - 1)
    amp = np.take_along_axis(ds.amplitude.values, idx[..., None, None], axis=2)[..., 0, :]
    ax[1, 0].bar(ds.degree, np.nanmean(amp.reshape(-1, ds.sizes["degree"]), axis=0))  # NaN: seeds not run
    ax[1, 0].set(xlabel="degree l", ylabel="A_l at t_delta (all runs)", title="mode spectrum at breakdown")
    ax[1, 1].loglog(ds.t_delta_predicted.sel(delta=d0).values.ravel(), td.values.ravel(), ".")
    lim = [float(td.min()), float(td.max())]  # (NaN-skipping)
    ax[1, 1].plot(lim, lim, "k--")
    ax[1, 1].set(xlabel="predicted t_delta (run's own A_l*(0))", ylabel="measured t_delta", title="per run")
    ax[1, 2].plot(n, ds.n_clusters.isel(time=-1).mean("seed"), "o-", label="clusters at t1")
    ax[1, 2].axhline(int(ds.l_star), color="k", ls="--", label="l*")
    ax[1, 2].set(xscale="log", xlabel="n", ylabel="cluster count", title=f"after breakdown (t1 = {ds.attrs['t1']:g})")
    ax[1, 2].legend(fontsize=7)
    fig.suptitle(_params(ds))
    save_figure(fig, path)


def _stable_figure(ds, path):
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    n = ds.n_particles.values
    for i, nn in enumerate(n):
        ax[0].plot(ds.time, np.sqrt(nn) * ds.distance.isel(n_particles=i).mean("seed"), label=f"n={nn:.0e}")
    ax[0].set(xlabel="t", ylabel="sqrt(n) W1(mu_n(t), uniform)", title="stable: uniform-in-time chaos")
    ax[0].legend(fontsize=7)
    sup = ds.sup_scaled_distance
    ax[1].errorbar(n, sup.mean("seed"), yerr=sup.std("seed"), fmt="o-", capsize=3)
    ax[1].set(xscale="log", xlabel="n", ylabel="sup_t sqrt(n) W1", ylim=(0, None))
    fig.suptitle(_params(ds))
    save_figure(fig, path)


def _worst(ratio, big):
    """max |t_delta / t_pred - 1| over the runs at n >= 10^4 (all n if none; NaN if no prediction):
    below that, delta is within a small factor of the initial amplitude ~ n^-1/2."""
    r = ratio[big] if ratio.ndim == 2 and big.any() else ratio  # rows: n_particles
    return float(np.nanmax(np.abs(r - 1))) if np.isfinite(r).any() else float("nan")


def _share(dominant, l_star):
    """Fraction of the runs made (NaN: a seed not run at that n) whose dominant mode is l*."""
    return float((dominant == l_star).where(dominant.notnull()).mean())


def main(argv=None):
    args, out = parse(__doc__, argv)
    cfg = QUICK if args.quick else FULL
    pool = {} if args.quick else {"engine": "process", "max_workers": 2}
    common = {"n_boot": 200 if args.quick else 2000, "progress": not args.quick, **pool}
    model = MultiHead.scalar([1.0], d=2, beta=BETA_S1, kind="softmax")
    ds = metrics.chaos_horizon_study(model, l_max=4, store=out / "cells_unstable", **cfg["unstable"], **common)
    _save(ds, out / "chaos_horizon_s1.nc")
    kstar = mf.critical_kappa(BETA_S1, lam=1.0, kind="softmax")
    stable = metrics.chaos_horizon_study(model, l_max=4, kappa=0.8 * kstar, store=out / "cells_stable",
                                         **cfg["stable"], **common)
    _save(stable, out / "chaos_horizon_stable.nc")
    model2 = MultiHead.scalar([1.0, -1.0], d=3, beta=4.0, kind="softmax")
    s2 = metrics.chaos_horizon_study(model2, l_max=4, n_projections=32 if args.quick else 128,
                                     store=out / "cells_s2", **cfg["s2"], **common)
    _save(s2, out / "chaos_horizon_s2.nc")
    rows = []
    for name, d in (("S^1 unstable", ds), ("S^1 stable", stable), ("S^2 unstable", s2)):
        for delta in d.delta.values:
            td, pred = d.t_delta.sel(delta=delta), d.t_delta_predicted.sel(delta=delta)
            ratio = (td / pred).values if float(d.sigma_star) > 0 else np.array([np.nan])
            big = d.n_particles >= 10_000
            dom = d.dominant_mode.sel(delta=delta)
            rows.append((name, float(delta), float(d.sigma_star), int(d.l_star),
                         float(d.slope.sel(delta=delta)), float(d.slope_predicted),
                         _worst(ratio, big.values),
                         float(d.law_ks_pvalue.sel(delta=delta)),
                         _share(dom.where(big, drop=True), int(d.l_star)) if bool(big.any()) else
                         _share(dom, int(d.l_star)),
                         float(d.sup_scaled_distance.mean("seed").max() / d.sup_scaled_distance.mean("seed").min())))
    header = ["case", "delta", "sigma*", "l*", "slope", "1/(2 sigma*)", "max |t/t_pred - 1| (n >= 1e4)", "KS p",
              "dominant = l* (n >= 1e4)", "sup sqrt(n) W ratio over n"]
    print(write_table(out / "chaos_horizon.md", header, rows))
    _unstable_figure(ds, out / "chaos_horizon_s1.png")
    _stable_figure(stable, out / "chaos_horizon_stable.png")
    _unstable_figure(s2, out / "chaos_horizon_s2.png")
    return ds, stable, s2


if __name__ == "__main__":
    main()
