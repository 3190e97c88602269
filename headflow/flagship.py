"""Flagship study: metastable clusters of two attention heads on the circle, particles and mean field.

Two heterogeneous scalar USA heads (M_h = W_h = lambda_h I, lambda = (1, 0.5): score symmetry
and value alignment, so Theorem 11 holds) at beta = 16 drive n uniform tokens on S^1. At this
inverse temperature the interaction is local (width ~ beta^{-1/2}): the tokens first gather in
several clusters, which then merge only on much longer time scales (metastability). For
n = 64, 128, 256 and several seeds we save, without storing the trajectories, the energy E_multi
(it rises at the Theorem 11 rate; the residual of that identity is round-off), the mean attention
entropy per head and the number of clusters, and plot mean +- standard deviation over seeds on a
log time axis. A second part compares the particles with the mean-field reference: the
mean-field equation is solved once by finite volumes from the density 1 + 0.5 cos(6 theta), and
particle systems drawn from that law are measured against it (W1 and energy) as n grows.
A third part runs n = 200000 tokens from the same law with fast summation (NUFFT, O(n log n)
per step, every sum within its a-posteriori bound tol = 1e-10): a run that exact summation
would need hours for, and whose histogram lies on top of the mean-field density.

Writes flagship.nc (particles: dims n_particles, seed, time[, head]), flagship_meanfield.nc
(the mean-field comparison), flagship_large_n.nc (the large-n run against the mean-field
density), a table and five PNG figures, each stating its parameters.

Run:  headflow flagship --out outputs      (about two minutes on one core; ``--quick``: seconds)
      python -m headflow.flagship --out outputs    (the same; ``examples/flagship.py`` runs this module)
"""

from __future__ import annotations

import dataclasses
import pathlib
import time

import numpy as np
import xarray as xr

import metrics
import particles

from ._flagship_figures import figures, label
from .scripts import parse, write_table

FULL = {"n_values": [64, 128, 256], "n_seeds": 4, "lambdas": [1.0, 0.5], "beta": 16.0, "d": 2, "t1": 1000.0,
        "n_saves": 41, "method": "dopri5", "rtol": 1e-8, "atol": 1e-10, "eps": 1e-2, "seed": 0,
        "meanfield": {"n_values": [32, 64, 128, 256], "n_seeds": 4, "t1": 100.0, "n_saves": 6, "m_grid": 512,
                      "dt": 0.2, "amplitude": 0.5, "mode": 6},
        "large_n": {"n": 200_000, "t1": 6.0, "dt": 0.25, "n_saves": 4, "m_grid": 1024, "tol": 1e-10,
                    "exact_probe_n": 4096}}
QUICK = dict(FULL, n_values=[8, 16], n_seeds=2, t1=20.0, n_saves=9,
             meanfield=dict(FULL["meanfield"], n_values=[8, 16], n_seeds=2, t1=2.0, n_saves=3, m_grid=128),
             large_n=dict(FULL["large_n"], n=8192, t1=0.5, n_saves=2, m_grid=256, exact_probe_n=1024))


def _model(cfg):
    return particles.MultiHead.scalar(cfg["lambdas"], d=cfg["d"], beta=cfg["beta"], kind="usa",
                                      log_time_scale="auto")


# ---------------------------------------------------------------- the studies


def run(cfg):
    """Particles: several n and seeds; returns a Dataset (n_particles, seed, time[, head])."""
    model = _model(cfg)
    ts = np.concatenate([[0.0], np.geomspace(0.5, cfg["t1"], cfg["n_saves"] - 1)])
    keep = ["energy_multi", "kinetic", "rate_residual", "entropy"]

    def save_fn(t, x):
        diag = particles.diagnose(model, x, include=keep)
        diag["mean_entropy"] = diag.pop("entropy").mean(axis=1)
        diag["n_clusters"] = metrics.n_clusters(x, eps=cfg["eps"])
        return diag

    children = np.random.SeedSequence(cfg["seed"]).spawn(cfg["n_seeds"])  # seed s: the same x0 law for every n
    rows, snapshot = [], None
    for n in cfg["n_values"]:
        cells = []
        for s, ss in enumerate(children):
            x0 = particles.sample_uniform(n, d=cfg["d"], rng=np.random.default_rng(ss.spawn(1)[0]))
            store_x = n == cfg["n_values"][-1] and s == 0  # one space-time picture
            traj = particles.simulate(x0, model, t1=cfg["t1"], method=cfg["method"], rtol=cfg["rtol"],
                                      atol=cfg["atol"], save=particles.SaveAt(ts=ts, x=store_x, fn=save_fn))
            if store_x:
                snapshot = traj.x
                traj = dataclasses.replace(traj, x=None)  # the picture only, not the dataset
            cells.append(metrics.trajectory_to_dataset(traj, model).expand_dims(seed=[s]))
        ds = xr.concat(cells, dim="seed", combine_attrs="drop")
        ds["entropy_max"] = ((), np.log(n), {"long_name": "log n, the maximal entropy (nats)", "units": "1"})
        rows.append(ds.expand_dims(n_particles=[n]))
    out = xr.concat(rows, dim="n_particles", combine_attrs="drop")
    out["n_particles"].attrs.update(long_name="number of tokens", units="1")
    out["seed"].attrs.update(long_name="seed index (SeedSequence(seed).spawn(n_seeds))", units="1")
    out.attrs = metrics.netcdf_safe({
        "title": "headflow flagship: metastable clusters of two USA heads on S^1",
        "source": f"headflow {particles.__version__}",
        "history": "created by headflow.flagship",
        **metrics.model_attrs(model),
        **metrics.provenance(config=cfg, seeds={"entropy": str(np.random.SeedSequence(cfg["seed"]).entropy),
                                                "children": "SeedSequence(seed).spawn(n_seeds)[s].spawn(1)[0]"},
                             model=model),
    })
    return out, snapshot


def run_meanfield(cfg):
    """The mean-field comparison (metrics.mean_field_limit_study) with the same model."""
    mf = cfg["meanfield"]
    a, k = mf["amplitude"], mf["mode"]
    ds = metrics.mean_field_limit_study(
        _model(cfg), metrics.density_of_angle(lambda th: 1.0 + a * np.cos(k * th)), n_values=tuple(mf["n_values"]),
        n_seeds=mf["n_seeds"], t1=mf["t1"], n_saves=mf["n_saves"], m_grid=mf["m_grid"], dt=mf["dt"], seed=cfg["seed"])
    ds.attrs["title"] = "headflow flagship: particles against the mean-field reference on S^1"
    ds.attrs["density"] = f"1 + {a:g} cos({k} theta)"
    return ds


def _sample_density(n, amplitude, mode, rng):
    """n angles from ρ0(θ) ∝ 1 + a cos(kθ) by rejection (acceptance 1/(1 + a))."""
    out = np.empty(0)
    while out.size < n:
        th = rng.uniform(-np.pi, np.pi, 2 * n)
        keep = rng.uniform(0, 1 + amplitude, th.size) < 1 + amplitude * np.cos(mode * th)
        out = np.concatenate([out, th[keep]])
    return out[:n]


def run_large_n(cfg):
    """n = 2e5 tokens with fast summation against the mean-field density (fv_circle)."""
    import ot

    import meanfield

    big, mf = cfg["large_n"], cfg["meanfield"]
    a, k = mf["amplitude"], mf["mode"]
    model = dataclasses.replace(_model(cfg), summation="auto", tol=big["tol"])
    rng = np.random.default_rng(np.random.SeedSequence(cfg["seed"]).spawn(cfg["n_seeds"] + 1)[-1])
    th0 = _sample_density(big["n"], a, k, rng)
    x0 = np.stack([np.cos(th0), np.sin(th0)], axis=1)
    ts = np.linspace(0.0, big["t1"], big["n_saves"])
    keep = ["energy_multi", "entropy", "summation_bound", "summation_fast"]

    def save_fn(t, x):
        diag = particles.diagnose(model, x, include=keep)
        diag["mean_entropy"] = diag.pop("entropy").mean(axis=1)
        return diag

    start = time.perf_counter()
    traj = particles.simulate(x0, model, t1=big["t1"], dt=big["dt"], method="rk4",
                              save=particles.SaveAt(ts=ts, fn=save_fn))
    seconds = time.perf_counter() - start
    # the exact pass at this n, extrapolated as n^2 from one measured right-hand side
    probe = x0[: big["exact_probe_n"]]
    exact = dataclasses.replace(model, summation="exact")
    t = time.perf_counter()
    exact.velocity(probe)
    rhs_exact = (time.perf_counter() - t) * (big["n"] / probe.shape[0]) ** 2
    n_rhs = 4 * traj.n_steps
    grid, areas = meanfield.circle_grid(big["m_grid"])
    mu0 = meanfield.GridMeasure.from_density(grid, areas, lambda p: 1.0 + a * np.cos(k * np.arctan2(p[:, 1], p[:, 0])))
    ref = meanfield.wasserstein_ascent(mu0, model, t1=big["t1"], n_saves=big["n_saves"], scheme="fv_circle")
    centres = (np.arange(big["m_grid"]) + 0.5) / big["m_grid"]
    w1 = []
    for i in range(len(ts)):
        th = np.mod(np.arctan2(traj.x[i][:, 1], traj.x[i][:, 0]), 2 * np.pi) / (2 * np.pi)
        # W1 on the circle (POT, exact, O(n log n)), in radians; the grid's own resolution is π/m
        w1.append(2 * np.pi * float(ot.wasserstein_circle(th, centres, v_weights=ref.mass[i], p=1)[0]))
    theta_hist = np.linspace(-np.pi, np.pi, 181)
    hist = np.stack([np.histogram(np.arctan2(x[:, 1], x[:, 0]), bins=theta_hist, density=True)[0] for x in traj.x])
    ds = metrics.trajectory_to_dataset(dataclasses.replace(traj, x=None), model,
                                       title="headflow flagship: n = 2e5 tokens with fast summation vs mean field")
    ds["w1_to_meanfield"] = ("time", np.array(w1), {"long_name": "W1(mu_n(t), mu(t)) on the circle", "units": "rad"})
    ds["energy_meanfield"] = ("time", ref.energy, {"long_name": "E_multi of the mean-field solution", "units": "1"})
    centres_h = 0.5 * (theta_hist[1:] + theta_hist[:-1])
    ds["density_particles"] = (("time", "angle"), hist, {"long_name": "histogram density of the tokens",
                                                          "units": "rad-1"})
    ref_density = ref.mass * big["m_grid"] / (2 * np.pi)
    th_grid = np.mod(2 * np.pi * centres + np.pi, 2 * np.pi) - np.pi
    order = np.argsort(th_grid)
    ds["density_meanfield"] = (("time", "angle"),
                               np.stack([np.interp(centres_h, th_grid[order], r[order], period=2 * np.pi)
                                         for r in ref_density]),
                               {"long_name": "mean-field density (fv_circle), at the histogram bins", "units": "rad-1"})
    ds = ds.assign_coords(angle=("angle", centres_h, {"long_name": "token angle", "units": "rad"}))
    ds.attrs.update(metrics.netcdf_safe({
        "n_particles": big["n"], "wall_seconds": seconds, "n_rhs": n_rhs,
        "exact_rhs_seconds_extrapolated": rhs_exact, "exact_run_hours_extrapolated": rhs_exact * n_rhs / 3600,
        "w1_iid_scale": float(np.sqrt(1.0 / big["n"])),
    }))
    return ds


def _write(ds, path: pathlib.Path) -> None:
    tmp = path.with_suffix(".nc.part")
    ds.to_netcdf(tmp)  # written whole, then renamed: no partial file that looks complete
    tmp.replace(path)


def main(argv=None):
    args, outdir = parse(__doc__, argv)
    cfg = QUICK if args.quick else FULL
    start = time.perf_counter()
    ds, snapshot = run(cfg)
    mf = run_meanfield(cfg)
    large = run_large_n(cfg)
    _write(ds, outdir / "flagship.nc")
    _write(mf, outdir / "flagship_meanfield.nc")
    _write(large, outdir / "flagship_large_n.nc")
    figs = figures(ds, snapshot, mf, large, cfg, outdir)
    final = ds.isel(time=-1)
    rows = []
    for n in ds.n_particles.values:
        c, f = ds.sel(n_particles=n), final.sel(n_particles=n)
        rows.append((int(n), float(f.n_clusters.mean()), float(f.n_clusters.std()),
                     float((f.energy_multi / c.energy_multi.isel(time=0)).mean()),
                     float((f.mean_entropy.isel(head=0) / np.log(n)).mean()),
                     float((np.abs(c.rate_residual) / c.kinetic.max("time")).max())))
    print(label(cfg))
    print(write_table(outdir / "flagship.md", ["n", "clusters at t1 (mean)", "sd", "E(t1)/E(0)", "entropy/log n",
                                               "max Thm 11 residual / max kinetic"], rows))
    print(f"W1(mu_n(0), mu(0)) ~ n^{mf.attrs['rate_at_t0']:.2f} (theory n^-0.5)")
    la = large.attrs
    print(f"n = {la['n_particles']}: {la['wall_seconds']:.0f} s for {la['n_rhs']} right-hand sides with fast summation "
          f"(exact: ~{la['exact_run_hours_extrapolated']:.1f} h); max bound {la['summation_bound_max']:.1e}; "
          f"W1 to the mean field {float(large.w1_to_meanfield.max()):.2e} rad (n^-1/2 = {la['w1_iid_scale']:.1e})")
    print(f"wrote flagship.nc, flagship_meanfield.nc and {len(figs)} figures to {outdir} "
          f"in {time.perf_counter() - start:.0f} s")
    return ds


if __name__ == "__main__":
    main()
