r"""The n → ∞ study: particle systems against the mean-field solution from the same law.

:func:`mean_field_limit_study` solves the mean-field equation on S^1 once (finite volumes,
:func:`meanfield.wasserstein_ascent`), draws n = 2^k i.i.d. tokens from the same initial
density for several seeds, runs the particle flow, and measures at each save time the
exact :math:`W_1` and :math:`W_2` (POT, geodesic cost) between :math:`\mu_n(t)` and
:math:`\mu(t)`, with energy, attention entropy and cluster count of each particle system.
Theory (docs/theory.md §6): :math:`W_1(\mu_n(0), \mu(0)) \sim n^{-1/2}` on S^1 and the gap grows at
most like :math:`e^{Lt}` after.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

import meanfield as mf
from particles import MultiHead, SaveAt, __version__, simulate
from particles.validation import InvalidParameterError

from .clustering import n_clusters
from .dataset import model_attrs, netcdf_safe, provenance
from .transport import wasserstein

__all__ = ["mean_field_limit_study", "sample_grid_measure"]


def sample_grid_measure(mu: mf.GridMeasure, n: int, rng) -> np.ndarray:
    """n i.i.d. points on S^1 from a circle-grid measure: a cell by its mass, then uniform in it."""
    m = len(mu.mass)
    rng = np.random.default_rng(rng)
    k = rng.choice(m, size=n, p=mu.mass)
    theta = (k + rng.uniform(size=n)) * 2 * np.pi / m
    return np.stack([np.cos(theta), np.sin(theta)], axis=1)


def mean_field_limit_study(model: MultiHead, density_fn, *, n_values=(16, 32, 64, 128, 256), n_seeds: int = 4,
                           t1: float = 2.0, n_saves: int = 5, m_grid: int = 1024, dt: float = 0.01,
                           seed: int = 0, progress: bool = False) -> xr.Dataset:
    """Run the study and return a Dataset with dims (n_particles, seed, time).

    Parameters
    ----------
    model : MultiHead on d = 2 (kind "usa" or "softmax")
    density_fn : callable θ -> density (unnormalised), vectorised
    n_values : sequence of int
    n_seeds : int
    t1, n_saves : float, int
    m_grid : int
        Cells of the mean-field grid (its own error must stay below the n^{-1/2} gap).
    dt : float
        RK4 step of the particle runs.
    progress : bool
        tqdm progress bar over the (n, seed) particle runs.
    """
    if model.d != 2:
        raise InvalidParameterError(f"mean_field_limit_study runs on S^1: the model must have d = 2; got d = {model.d}.")
    pts, areas = mf.circle_grid(m_grid)
    mu0 = mf.GridMeasure.from_density(pts, areas, lambda y: density_fn(np.arctan2(y[:, 1], y[:, 0])))
    ref = mf.wasserstein_ascent(mu0, model, t1=t1, n_saves=n_saves, scheme="fv_circle")
    ts = ref.t
    shape = (len(n_values), n_seeds, len(ts))
    w1, w2, energy, entropy, clusters = (np.empty(shape) for _ in range(5))
    children = np.random.SeedSequence(seed).spawn(n_seeds)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(n_values) * n_seeds, desc="study", unit="run")
    for a, n in enumerate(n_values):
        for s, ss in enumerate(children):
            if bar is not None:
                bar.update(1)
            x0 = sample_grid_measure(mu0, int(n), np.random.default_rng(ss))
            traj = simulate(x0, model, t1=t1, dt=dt, save=SaveAt(ts=ts))
            for k, x in enumerate(traj.x):
                keep = ref.mass[k] > 1e-300
                grid_pts, grid_w = pts[keep], ref.mass[k][keep] / ref.mass[k][keep].sum()
                w1[a, s, k] = wasserstein(x, grid_pts, None, grid_w, p=1)
                w2[a, s, k] = wasserstein(x, grid_pts, None, grid_w, p=2)
                energy[a, s, k] = model.energy(x)
                entropy[a, s, k] = model.entropy(x).mean()
                clusters[a, s, k] = n_clusters(x, eps=1e-3)
    if bar is not None:
        bar.close()
    dims = ("n_particles", "seed", "time")
    ds = xr.Dataset(
        {
            "w1": (dims, w1, {"long_name": "W1(mu_n(t), mu(t)), geodesic cost", "units": "rad"}),
            "w2": (dims, w2, {"long_name": "W2(mu_n(t), mu(t)), geodesic cost", "units": "rad"}),
            "energy": (dims, energy, {"long_name": "particle energy E_multi[mu_n]", "units": "1"}),
            "mean_entropy": (dims, entropy, {"long_name": "token-averaged attention entropy (nats)", "units": "1"}),
            "n_clusters": (dims, clusters, {"long_name": "number of clusters (geodesic eps = 1e-3)", "units": "1"}),
            "energy_meanfield": (("time",), ref.energy, {"long_name": "mean-field energy E_multi[mu]", "units": "1"}),
        },
        coords={
            "n_particles": ("n_particles", np.asarray(n_values), {"long_name": "number of tokens", "units": "1"}),
            "seed": ("seed", np.arange(n_seeds), {"long_name": "seed index (SeedSequence spawn)", "units": "1"}),
            "time": ("time", ts, {"long_name": "time", "units": "1"}),
        },
    )
    slope = np.polyfit(np.log(n_values), np.log(ds.w1.isel(time=0).mean("seed").values), 1)[0]
    ds.attrs = netcdf_safe({
        "title": "headflow mean-field limit study on S^1",
        "source": f"headflow {__version__}",
        "history": "created by metrics.mean_field_limit_study",
        "m_grid": m_grid, "dt": dt, "t1": t1, "seed_entropy": str(np.random.SeedSequence(seed).entropy),
        "w1_rate_at_t0": float(slope),
        **model_attrs(model),
        **provenance(
            config={"n_values": list(n_values), "n_seeds": n_seeds, "t1": t1, "n_saves": n_saves, "m_grid": m_grid,
                    "dt": dt, "seed": seed, "density_fn": density_fn, "model": model_attrs(model),
                    "reference": "meanfield.wasserstein_ascent(scheme='fv_circle')"},
            seeds={"entropy": str(np.random.SeedSequence(seed).entropy), "children": "SeedSequence(seed).spawn(n_seeds)"},
            model=model),
    })
    return ds
