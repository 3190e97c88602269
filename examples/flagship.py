"""Flagship study: energy, attention entropy and cluster structure as n grows.

Two heterogeneous scalar USA heads (M_h = W_h = λ_h I, score symmetry and value alignment)
drive n uniform tokens on S^2 for n = 16 ... 256. Along each run we save, without storing
the trajectory, the energy E_multi (Theorem 11: it rises at the kinetic rate), the residual
of that identity, the mean attention entropy per head (it rises to log n as the tokens
collapse) and the number of clusters. The result is one netCDF Dataset with dims
(n_particles, time[, head]) and three figures.

Run:  python examples/flagship.py --out outputs
"""

from __future__ import annotations

import argparse
import pathlib

import numpy as np
import xarray as xr

import metrics
import particles

# ---------------------------------------------------------------- the study


def run(n_values=(16, 32, 64, 128, 256), lambdas=(1.0, 0.4), beta=2.0, d=3, t1=12.0, dt=0.02, seed=0):
    model = particles.MultiHead.scalar(list(lambdas), d=d, beta=beta, kind="usa")
    ts = np.linspace(0.0, t1, 61)
    seeds = np.random.SeedSequence(seed).spawn(len(n_values))
    keep = ["energy_multi", "kinetic", "rate_residual", "entropy", "rd_margin_min"]

    def save_fn(t, x):
        diag = particles.diagnose(model, x, include=keep)
        diag["mean_entropy"] = diag.pop("entropy").mean(axis=1)
        diag["n_clusters"] = metrics.n_clusters(x, eps=1e-3)
        return diag

    cells = []
    for n, ss in zip(n_values, seeds):
        x0 = particles.sample_uniform(n, d, np.random.default_rng(ss))
        traj = particles.simulate(x0, model, t1=t1, dt=dt, method="rk4", save=particles.SaveAt(ts=ts, x=False, fn=save_fn))
        ds = metrics.trajectory_to_dataset(traj, model)
        ds["entropy_max"] = ((), np.log(n), {"long_name": "log n, the maximal entropy", "units": "nat"})
        cells.append(ds.expand_dims(n_particles=[n]))
    out = xr.concat(cells, dim="n_particles", combine_attrs="drop_conflicts")
    out["n_particles"].attrs.update(long_name="number of tokens", units="1")
    out.attrs.update(title="headflow flagship: energy, entropy and clusters as n grows",
                     seed_entropy=str(np.random.SeedSequence(seed).entropy), t1=t1, dt=dt,
                     lambdas=list(map(float, lambdas)))
    return out


# ---------------------------------------------------------------- figures


def figures(ds: xr.Dataset, outdir: pathlib.Path) -> list[pathlib.Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for n in ds.n_particles.values:
        cell = ds.sel(n_particles=n)
        t = cell.time.values
        axes[0].plot(t, cell.energy_multi / cell.energy_multi[0], label=f"n={n}")
        axes[1].plot(t, cell.mean_entropy.isel(head=0) / np.log(n), label=f"n={n}")
        axes[2].step(t, cell.n_clusters, where="post", label=f"n={n}")
    axes[0].set(xlabel="t", ylabel="E_multi(t) / E_multi(0)", title="Energy rises (Theorem 11)")
    axes[1].set(xlabel="t", ylabel="mean entropy / log n", title="Entropy rises to log n (head 1)")
    axes[2].set(xlabel="t", ylabel="clusters", yscale="log", title="Cluster count")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    paths.append(outdir / "flagship_energy_entropy_clusters.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 3.6))
    for n in ds.n_particles.values:
        cell = ds.sel(n_particles=n)
        # relative to the run's peak rate: once converged the rate itself is ~0
        rel = np.abs(cell.rate_residual) / float(cell.kinetic.max())
        ax.semilogy(cell.time, np.maximum(rel, 1e-17), label=f"n={n}")
    ax.set(xlabel="t", ylabel="|dE/dt − kinetic| / max kinetic", title="Theorem 11 residual (round-off)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(outdir / "flagship_theorem11_residual.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="outputs", help="output folder")
    parser.add_argument("--quick", action="store_true", help="small sizes (for tests)")
    args = parser.parse_args(argv)
    outdir = pathlib.Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    ds = run(n_values=(8, 16), t1=3.0) if args.quick else run()
    path = outdir / "flagship.nc"
    tmp = path.with_suffix(".nc.part")
    ds.to_netcdf(tmp)  # written whole, then renamed: no partial file that looks complete
    tmp.replace(path)
    figs = figures(ds, outdir)
    final = ds.isel(time=-1)
    print(f"wrote {path} and {len(figs)} figures")
    print(" n    E(T)/E(0)   entropy/log n   clusters   max |residual| / max kinetic")
    for n in ds.n_particles.values:
        c = ds.sel(n_particles=n)
        rel = float(np.abs(c.rate_residual).max() / c.kinetic.max())
        print(f"{n:4d}  {float(c.energy_multi[-1] / c.energy_multi[0]):9.4f}   "
              f"{float(final.sel(n_particles=n).mean_entropy.isel(head=0) / np.log(n)):12.6f}   "
              f"{int(final.sel(n_particles=n).n_clusters):8d}   {rel:.2e}")
    return ds


if __name__ == "__main__":
    main()
