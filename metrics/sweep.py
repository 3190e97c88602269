r"""Parameter sweeps over (n_particles, beta, n_heads, kind, seed) with resumable storage.

:func:`run_sweep` runs one particle simulation per cell of the grid × seeds, records the
named metrics of :data:`metrics.METRICS` (plus the Theorem 11 rate) at the save times, and
returns one ``xr.Dataset`` whose dims are the swept parameters, ``seed`` and ``time``.

Contract:

1. **Reproducible.** Cell randomness comes from ``SeedSequence(entropy, spawn_key=(k,))``
   for seed index k (the same as ``SeedSequence(entropy).spawn(n_seeds)[k]``): the same
   seed index gives the same draw whatever the other parameters; ``entropy`` is stored in
   the attrs.
2. **Incremental and resumable.** With ``store=DIR`` each finished cell is written to its
   own netCDF file (written to a temporary name, then renamed, so a killed run never leaves
   a file that looks complete); a rerun loads the finished cells and computes only the rest.
3. **Engines.** ``"serial"`` (default), ``"process"`` (a local process pool), or a
   ``dask.distributed.Client`` for sweeps that outgrow one machine; each worker writes its
   own cell, so a dead worker loses only its cell.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import pathlib

import numpy as np
import xarray as xr

from particles import MultiHead, SaveAt, __version__, diagnose, sample_uniform, simulate
from particles.validation import InvalidParameterError, check_choice

from .dataset import netcdf_safe, provenance
from .registry import METRICS

__all__ = ["run_sweep", "default_model", "SWEEP_PARAMS"]

#: parameters a grid may sweep, with their long names
SWEEP_PARAMS = {
    "n_particles": "number of tokens",
    "beta": "inverse temperature",
    "n_heads": "number of heads",
    "kind": "attention kind",
    "d": "ambient dimension",
}
_DEFAULTS = {"n_particles": 32, "beta": 1.0, "n_heads": 1, "kind": "softmax", "d": 3}


def default_model(params: dict, rng: np.random.Generator) -> MultiHead:
    r"""Heads :math:`M_h = W_h = Q_h\,\mathrm{diag}(u_h)\,Q_h^\top/H` with random rotations
    :math:`Q_h` and :math:`u_h \sim U(0.5, 1.5)^d` (symmetric, value-aligned, positive definite)."""
    H, d = int(params["n_heads"]), int(params["d"])
    M = np.empty((H, d, d))
    for h in range(H):
        q, r = np.linalg.qr(rng.standard_normal((d, d)))
        q = q * np.sign(np.diag(r))
        M[h] = (q * rng.uniform(0.5, 1.5, d)) @ q.T / H
    return MultiHead(M, M.copy(), beta=float(params["beta"]), kind=str(params["kind"]))


def _cell_key(params: dict, seed_index: int, settings: dict) -> str:
    blob = json.dumps({"params": params, "seed": seed_index, "settings": settings}, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


def _run_cell(params: dict, seed_index: int, settings: dict, path: str | None) -> xr.Dataset:
    """Simulate one cell and return its Dataset (dims: time); write it to ``path`` if given,
    or load it from there when a previous run finished it."""
    path = None if path is None else pathlib.Path(path)
    if path is not None and path.exists():
        with xr.open_dataset(path) as ds:
            return ds.load()
    ss = np.random.SeedSequence(settings["entropy"], spawn_key=(seed_index,))
    rng_init, rng_model, rng_noise = (np.random.default_rng(s) for s in ss.spawn(3))
    model = settings["model_fn"](params, rng_model)
    x0 = sample_uniform(int(params["n_particles"]), int(params["d"]), rng_init)
    names = settings["metrics"]

    def save_fn(t, x):
        row = {name: METRICS[name].fn(x, None, model) for name in names}
        diag = diagnose(model, x, include=["kinetic", "rate_residual"])
        row.update(diag)
        return row

    traj = simulate(x0, model, t1=settings["t1"], dt=settings["dt"], method=settings["method"],
                    save=SaveAt(ts=settings["ts"], x=False, fn=save_fn),
                    kappa=settings["kappa"], rng=rng_noise, on_failure="return")
    data = {k: ("time", np.asarray(v, dtype=float)) for k, v in traj.saved.items()}
    n_t = len(settings["ts"])
    for k, (dims, v) in list(data.items()):
        if len(v) < n_t:  # a failed run: pad, and say so in the status variable
            data[k] = (dims, np.concatenate([v, np.full(n_t - len(v), np.nan)]))
    data["status"] = ((), int(traj.success))
    ds = xr.Dataset(data, coords={"time": ("time", np.asarray(settings["ts"]))})
    if path is not None:
        tmp = path.with_name(path.name + f".part{os.getpid()}")
        ds.to_netcdf(tmp)
        os.replace(tmp, path)
    return ds


def run_sweep(
    grid: dict,
    *,
    n_seeds: int = 1,
    seed: int | None = 0,
    t1: float = 10.0,
    dt: float = 0.05,
    n_saves: int = 11,
    method: str = "rk4",
    kappa: float = np.inf,
    metrics=("n_clusters", "energy_multi", "mean_entropy"),
    model_fn=default_model,
    engine="serial",
    max_workers: int | None = None,
    store: str | os.PathLike | None = None,
    progress: bool = False,
    cell_fn=None,
    cell_settings: dict | None = None,
) -> xr.Dataset:
    """Run the grid × seeds and return one labelled Dataset.

    Parameters
    ----------
    grid : dict of parameter name to list of values
        Swept parameters, any of :data:`SWEEP_PARAMS`; the others take their defaults
        (n_particles=32, beta=1, n_heads=1, kind="softmax", d=3).
    n_seeds : int
        Independent initial conditions per cell (dim ``seed``).
    seed : int or None
        Root entropy (``None`` draws fresh entropy; it is recorded in the attrs).
    t1, dt, n_saves, method, kappa
        Simulation settings (``n_saves`` equally spaced save times in [0, t1]).
    metrics : sequence of str
        Names from :data:`metrics.METRICS`, evaluated at each save time.
    model_fn : callable ``(params, rng) -> MultiHead``
        Builds the model of a cell (top-level function when using processes or dask).
    engine : "serial", "process" or a dask.distributed.Client
    store : path, optional
        Folder for one netCDF file per finished cell; enables resuming.
    progress : bool
        tqdm progress bar over cells.
    cell_fn : callable ``(params, seed_index, settings, path) -> xr.Dataset``, optional
        Replaces the default cell (a particle run from uniform tokens); it must honour the same
        contract (load ``path`` if it exists, else compute, write atomically, return dims ``time``).
        Used by :func:`metrics.mean_field_limit_study`.
    cell_settings : dict, optional
        Extra entries of ``settings`` for ``cell_fn``; its ``"key"`` entry (a string) enters the
        cell file names, so two studies with different settings never share cells.

    Returns
    -------
    xr.Dataset with dims (*grid keys, seed, time)
    """
    unknown = set(grid) - set(SWEEP_PARAMS)
    if unknown:
        raise InvalidParameterError(
            f"grid keys must be among {sorted(SWEEP_PARAMS)}; got unknown {sorted(unknown)}."
        )
    for name in metrics:
        check_choice(name, "metrics", METRICS, "run_sweep")
    axes = {k: list(v) for k, v in grid.items()}
    for k, v in axes.items():
        if len(v) == 0:
            raise InvalidParameterError(f"grid[{k!r}] is empty; give at least one value.")
    entropy = np.random.SeedSequence(seed).entropy
    ts = np.linspace(0.0, t1, n_saves)
    settings = {"entropy": entropy, "t1": float(t1), "dt": float(dt), "method": method, "kappa": float(kappa),
                "ts": ts, "metrics": list(metrics), "model_fn": model_fn}
    key_settings = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in settings.items() if k != "model_fn"}
    key_settings["model_fn"] = f"{model_fn.__module__}.{model_fn.__qualname__}"
    if cell_settings is not None:
        settings.update(cell_settings)
        key_settings["cell_key"] = str(cell_settings.get("key", ""))
    run_cell = _run_cell if cell_fn is None else cell_fn
    if store is not None:
        pathlib.Path(store).mkdir(parents=True, exist_ok=True)
    names = list(axes)
    cells = []
    for values in itertools.product(*axes.values()):
        params = dict(_DEFAULTS)
        params.update(dict(zip(names, values)))
        for s in range(n_seeds):
            cells.append((values, s, params))
    paths = [None if store is None else str(pathlib.Path(store) / f"cell_{_cell_key(params, s, key_settings)}.nc")
             for _, s, params in cells]

    results = {}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(cells), desc="sweep", unit="cell")

    def done(idx, ds):
        results[idx] = ds
        if bar is not None:
            bar.update(1)

    if engine == "serial":
        for idx, (_, s, params) in enumerate(cells):
            done(idx, run_cell(params, s, settings, paths[idx]))
    elif engine == "process":
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        # spawn, not fork: a forked child can inherit HDF5/netCDF locks held by this process
        with ProcessPoolExecutor(max_workers=max_workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futs = {pool.submit(run_cell, params, s, settings, paths[idx]): idx
                    for idx, (_, s, params) in enumerate(cells)}
            for fut in as_completed(futs):
                done(futs[fut], fut.result())
    elif hasattr(engine, "submit") and hasattr(engine, "gather"):
        from distributed import as_completed as dask_completed

        futs = [engine.submit(run_cell, params, s, settings, paths[idx], pure=False)
                for idx, (_, s, params) in enumerate(cells)]
        where = {f.key: i for i, f in enumerate(futs)}
        for fut in dask_completed(futs):
            done(where[fut.key], fut.result())
    else:
        raise InvalidParameterError(
            f"engine must be 'serial', 'process' or a dask.distributed.Client; got {engine!r}."
        )
    if bar is not None:
        bar.close()
    ds = _assemble(axes, n_seeds, cells, results, ts, metrics, entropy, settings)
    # the engine is left out: serial, process and dask runs of one config give identical datasets
    config = {"grid": axes, "n_seeds": n_seeds, "seed": seed, "defaults": _DEFAULTS, "n_saves": n_saves, **key_settings}
    probe = model_fn(cells[0][2], np.random.default_rng(0))  # only its summation mode and tol are read
    ds.attrs.update(provenance(config=config, seeds={"entropy": str(entropy), "spawn_key": "(seed index,)"},
                               model=probe))
    return ds


def _assemble(axes, n_seeds, cells, results, ts, metrics, entropy, settings) -> xr.Dataset:
    shape = tuple(len(v) for v in axes.values()) + (n_seeds, len(ts))
    var_names = [v for v in results[0].data_vars if v != "status"]
    arrays = {v: np.full(shape, np.nan) for v in var_names}
    status = np.zeros(shape[:-1], dtype=np.int8)
    index = {k: {val: i for i, val in enumerate(v)} for k, v in axes.items()}
    for idx, (values, s, _) in enumerate(cells):
        pos = tuple(index[k][val] for k, val in zip(axes, values)) + (s,)
        for v in var_names:
            arrays[v][pos] = results[idx][v].values
        status[pos] = int(results[idx]["status"])
    dims = tuple(axes) + ("seed", "time")
    coords = {k: (k, np.asarray(v), {"long_name": SWEEP_PARAMS[k], "units": "1"}) for k, v in axes.items()}
    coords["seed"] = ("seed", np.arange(n_seeds), {"long_name": "seed index (SeedSequence spawn key)", "units": "1"})
    coords["time"] = ("time", ts, {"long_name": "time", "units": "1"})
    from .dataset import VARIABLES

    data_vars = {}
    for v in var_names:
        if v in METRICS:
            attrs = {"long_name": METRICS[v].long_name, "units": METRICS[v].units}
        else:
            long_name, units, _ = VARIABLES.get(v, (v, "1", ()))
            attrs = {"long_name": long_name, "units": units}
        data_vars[v] = (dims, arrays[v], attrs)
    data_vars["success"] = (dims[:-1], status, {"long_name": "1 if the run reached t1", "units": "1"})
    fixed = {k: v for k, v in _DEFAULTS.items() if k not in axes}
    attrs = netcdf_safe({
        "title": "headflow sweep",
        "source": f"headflow {__version__}",
        "history": "created by metrics.run_sweep",
        "seed_entropy": str(entropy),
        "t1": settings["t1"], "dt": settings["dt"], "method": settings["method"], "kappa": settings["kappa"],
        "model_fn": f"{settings['model_fn'].__module__}.{settings['model_fn'].__qualname__}",
        **{f"fixed_{k}": v for k, v in fixed.items()},
    })
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)
