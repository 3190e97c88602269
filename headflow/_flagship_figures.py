"""The five figures of the flagship study (:mod:`headflow.flagship`), each stating its parameters."""

from __future__ import annotations

import pathlib

import numpy as np

from .scripts import pyplot, save_figure


def label(cfg, *, seeds: bool = True) -> str:
    """The parameters, as printed on every figure."""
    return (f"USA heads, H = {len(cfg['lambdas'])}, λ = {tuple(cfg['lambdas'])}, β = {cfg['beta']:g}, "
            f"tokens on $S^{{{cfg['d'] - 1}}}$; " + (f"{cfg['n_seeds']} seeds per n (mean ± sd); " if seeds else "")
            + f"{cfg['method']} rtol = {cfg['rtol']:g}; clusters: geodesic ε = {cfg['eps']:g}")


def _band(ax, t, da, lab, **kw):
    mean, sd = da.mean("seed").values, da.std("seed").values
    (line,) = ax.plot(t, mean, label=lab, **kw)
    ax.fill_between(t, mean - sd, mean + sd, color=line.get_color(), alpha=0.25, lw=0)


def figures(ds, snapshot, mf, large, cfg, outdir: pathlib.Path) -> list[pathlib.Path]:
    """The five PNG figures of the three datasets; returns their paths."""
    plt = pyplot()
    return (_particle_figures(plt, ds, snapshot, cfg, outdir) + [_meanfield_figure(plt, mf, cfg, outdir)]
            + [_large_n_figure(plt, large, cfg, outdir)])


def _particle_figures(plt, ds, snapshot, cfg, outdir: pathlib.Path) -> list[pathlib.Path]:
    paths = []
    t = ds.time.values
    tl = np.where(t > 0, t, t[1] / 2)  # t = 0 drawn at the left edge of the log axis

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for n in ds.n_particles.values:
        c = ds.sel(n_particles=n)
        _band(axes[0], tl, c.n_clusters, f"n = {n}")
        _band(axes[1], tl, c.energy_multi / c.energy_multi.isel(time=0), f"n = {n}")
        _band(axes[2], tl, c.mean_entropy.isel(head=0) / np.log(n), f"n = {n}")
    axes[0].set(xscale="log", yscale="log", xlabel="t (rescaled time)", ylabel="clusters",
                title="Cluster count: plateaus are metastable states")
    axes[1].set(xscale="log", xlabel="t (rescaled time)", ylabel="E_multi(t) / E_multi(0)",
                title="Energy rises (Theorem 11)")
    axes[2].set(xscale="log", xlabel="t (rescaled time)", ylabel="mean entropy / log n (head 1)",
                title="Attention entropy")
    axes[0].legend(fontsize=8)
    fig.suptitle(label(cfg), fontsize=9)
    paths.append(outdir / "flagship_clusters_energy_entropy.png")
    save_figure(fig, paths[-1])

    fig, ax = plt.subplots(figsize=(8, 4.2))
    theta = np.arctan2(snapshot[..., 1], snapshot[..., 0])
    for k in range(theta.shape[1]):
        ax.plot(tl, theta[:, k], ".", ms=1.5, color="C0")
    ax.set(xscale="log", xlabel="t (rescaled time)", ylabel="token angle θ_i", ylim=(-np.pi, np.pi),
           title=f"One run, n = {snapshot.shape[1]}: uniform → many clusters → few (metastable merging)")
    fig.suptitle(label(cfg, seeds=False), fontsize=8)
    paths.append(outdir / "flagship_spacetime.png")
    save_figure(fig, paths[-1])

    fig, ax = plt.subplots(figsize=(6, 4.2))
    for n in ds.n_particles.values:
        c = ds.sel(n_particles=n)
        rel = np.abs(c.rate_residual) / c.kinetic.max("time")
        _band(ax, tl, np.log10(np.maximum(rel, 1e-18)), f"n = {n}")
    ax.set(xscale="log", xlabel="t (rescaled time)", ylabel="log10 |dE/dt − kinetic| / max kinetic",
           title="Theorem 11 residual (round-off)")
    ax.legend(fontsize=8)
    fig.suptitle(label(cfg), fontsize=7)
    paths.append(outdir / "flagship_theorem11_residual.png")
    save_figure(fig, paths[-1])
    return paths


def _meanfield_figure(plt, mf, cfg, outdir: pathlib.Path) -> pathlib.Path:
    m = cfg["meanfield"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    n = mf.n_particles.values
    for ti in range(mf.sizes["time"]):
        w1 = mf.w1.isel(time=ti)
        axes[0].errorbar(n, w1.mean("seed"), yerr=w1.std("seed"), fmt="o-", capsize=3,
                         label=f"t = {float(mf.time[ti]):.3g}")
    w10 = float(mf.w1.isel(time=0).mean("seed")[0])
    axes[0].plot(n, w10 * (n / n[0]) ** -0.5, "k--", label="n^-1/2")
    axes[0].set(xscale="log", yscale="log", xlabel="n", ylabel="W1(μ_n(t), μ(t)) [rad]",
                title="Particles → mean field")
    axes[0].set_xticks(n, [str(k) for k in n])
    axes[0].minorticks_off()
    axes[0].legend(fontsize=7)
    for k in n:
        _band(axes[1], mf.time.values, mf.energy_gap.sel(n_particles=k), f"n = {k}")
    axes[1].set(xlabel="t (rescaled time)", ylabel="|E_multi[μ_n] − E_multi[μ]|", yscale="log",
                title="Energy gap: particles vs mean field")
    axes[1].legend(fontsize=7)
    for k in n:
        _band(axes[2], mf.time.values, mf.n_clusters.sel(n_particles=k), f"n = {k}")
    axes[2].axhline(m["mode"], color="k", ls=":", label=f"mode of ρ0 ({m['mode']})")
    axes[2].set(xlabel="t (rescaled time)", ylabel="clusters (geodesic ε = 1e-3)", yscale="log",
                title="Clusters follow the mean-field mode")
    axes[2].legend(fontsize=7)
    fig.suptitle(f"USA heads, H = {len(cfg['lambdas'])}, λ = {tuple(cfg['lambdas'])}, β = {cfg['beta']:g}, "
                 f"tokens on $S^{{{cfg['d'] - 1}}}$; {m['n_seeds']} seeds per n (mean ± sd); particles: rk4 dt = "
                 f"{m['dt']:g}; ρ0 ∝ 1 + {m['amplitude']:g} cos({m['mode']}θ); mean field: {m['m_grid']} finite "
                 "volumes (fv_circle)", fontsize=8)
    path = outdir / "flagship_meanfield.png"
    save_figure(fig, path)
    return path


def _large_n_figure(plt, large, cfg, outdir: pathlib.Path) -> pathlib.Path:
    big = cfg["large_n"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for i in range(large.sizes["time"]):
        (line,) = axes[0].plot(large.angle, large.density_particles.isel(time=i), lw=1,
                               label=f"particles, t = {float(large.time[i]):.3g}")
        axes[0].plot(large.angle, large.density_meanfield.isel(time=i), "--", color=line.get_color(), lw=1.5)
    axes[0].set(xlabel="θ", ylabel="density", title=f"n = {big['n']} tokens (solid) vs mean field (dashed)")
    axes[0].legend(fontsize=7)
    axes[1].plot(large.time, large.w1_to_meanfield, "o-", label="W1(μ_n(t), μ(t))")
    axes[1].axhline(large.attrs["w1_iid_scale"], color="k", ls=":", label="n^-1/2")
    axes[1].set(yscale="log", xlabel="t (rescaled time)", ylabel="W1 [rad]",
                title=f"{large.attrs['wall_seconds']:.0f} s with fast summation; exact: "
                      f"~{large.attrs['exact_run_hours_extrapolated']:.1f} h (extrapolated)")
    axes[1].legend(fontsize=7)
    fig.suptitle(f"USA heads, λ = {tuple(cfg['lambdas'])}, β = {cfg['beta']:g} on $S^1$; ρ0 ∝ 1 + "
                 f"{cfg['meanfield']['amplitude']:g} cos({cfg['meanfield']['mode']}θ); rk4 dt = {big['dt']:g}; "
                 f"summation auto (NUFFT), tol = {big['tol']:g}, max bound met "
                 f"{large.attrs['summation_bound_max']:.1e}; mean field: {big['m_grid']} finite volumes", fontsize=8)
    path = outdir / "flagship_large_n.png"
    save_figure(fig, path)
    return path
