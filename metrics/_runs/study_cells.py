"""A study's cells in :func:`metrics.run_sweep`'s key format and Dataset, on the cell engine, with the study's typed
settings handed to each cell as they are (:meth:`metrics.extend.Study.cells`)."""

from __future__ import annotations

import inspect

import xarray as xr

from .engine import run_typed_cell
from .sweep import _check_args, _grid_cells, _key_settings, _merge_fixed, _run, run_sweep

__all__ = ["study_sweep"]


def study_sweep(grid: dict, n_seeds: int, cell, study_settings, *, key: str, legacy_key: str | None, caller: str,
                label: str, model_fn, run: dict, **options) -> xr.Dataset:
    """The cells of a study over ``grid`` x ``n_seeds`` (:meth:`metrics.extend.Study.cells`), in run_sweep's key
    format 1 (the stores written since the first studies keep their names) and with its Dataset, checked by its
    declaration: ``run`` holds the run's seed, t1, dt, n_saves, kappa and method, ``options`` store, engine,
    max_workers and progress. Each cell is ``cell(params, seed_index, study_settings, entropy)`` on the typed
    settings as they are (sent to each worker once), never through the sweep's own dict."""
    bound = inspect.signature(run_sweep).bind(grid, n_seeds=n_seeds, metrics=(), model_fn=model_fn, **run, **options)
    bound.apply_defaults()
    a = run_sweep.__headflow_params__.validate(dict(bound.arguments))
    settings, opts = _check_args(caller, a["seed"], a["t1"], a["dt"], a["n_saves"], a["method"], a["kappa"], (),
                                 model_fn, a["max_workers"], a["progress"], a["max_pool_restarts"], a["engine"])
    key_settings = _key_settings(settings, model_fn, {"key": key})
    settings.update(caller=caller, progress_label=label)
    axes, entropy = a["grid"], settings["entropy"]
    fixed = _merge_fixed(None, axes)
    cells = _grid_cells(axes, n_seeds, fixed)
    return _run(caller, axes, n_seeds, cells, fixed, settings, key_settings,
                lambda idx, path, k: (run_typed_cell, cell, cells[idx][2], cells[idx][1], study_settings, entropy,
                                      path, k), shared=study_settings, named={"cell": cell, "settings": study_settings},
                legacy_key=legacy_key, store=a["store"], engine=a["engine"], opts=opts, current=None,
                seed=a["seed"], names=tuple(axes))
