r"""A study over a grid: the axes its settings declare, the typed settings of each grid point, the cells' keys
from the real model and settings, and the Dataset of the cells over (\*axes, seed, the cells' own dims).

A field of a study's settings marked ``setting(..., axis=True)`` (or ``axis="its long name"``) is a grid axis:
its value is one value or a sequence of them, each checked by the field's rule. The cells run over the product
of the axes times ``n_seeds``; each receives :func:`point_settings`, the settings with the point's values
(``dataclasses.replace``) and, for the axes a :class:`particles.MultiHead` takes (``beta``, ``d``,
``lambda_<h>``, ``spread``: :data:`metrics._studies.phase_grid.MODEL_AXES`), the settings' ``model`` with the
point's values put in. A cell's key is the SHA-256 of the study's name, the point, the seed index, the root
entropy, the run's settings (t1, dt, n_saves, kappa, method where the settings have them), the point's model
(:func:`metrics.extend.model_key`) and the settings' key fields: nothing a cell did not run with.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields, replace

import numpy as np
import xarray as xr

from particles import MultiHead
from particles.validation import InvalidParameterError

from .._data.dataset import time_coord
from .._runs.assemble import summation_attrs
from .._runs.engine import run_cells, run_typed_cell
from .._runs.executors import check_not_bootstrapping, check_picklable
from .._runs.failures import failed_cells, warn_failed
from .._runs.keys import model_key
from .phase_grid import AXIS_NAMES, grid_points, point_model

__all__ = ["RUN_SETTINGS", "axis_long_name", "grid_axes", "grid_of", "point_settings", "grid_cell_key", "run_grid",
           "grid_coords"]

#: the settings of a particle run that name a study's cells wherever the settings have them
RUN_SETTINGS = ("seed", "t1", "dt", "n_saves", "kappa", "method")
#: the grid axes whose values go into the settings' model (the others are read by the cells)
_MODEL_AXES = ("beta", "d", "spread")
_LONG_NAMES = {**AXIS_NAMES, "n": "number of tokens", "n_particles": "number of tokens"}


def grid_axes(settings_class) -> dict:
    """``{axis: long name}`` of the fields of ``settings_class`` marked ``axis``, in field order."""
    out = {}
    for f in fields(settings_class):
        mark = f.metadata.get("axis")
        if mark:
            out[f.name] = mark if isinstance(mark, str) else axis_long_name(f.name)
    return out


def axis_long_name(name: str) -> str:
    """The long name of a grid axis the library knows (β, n, d, H, spread), else the axis' name."""
    return _LONG_NAMES.get(name, name)


def grid_of(settings) -> dict:
    """``{axis: [values]}`` of the settings (one value: an axis of one point); values must be distinct."""
    grid = {}
    for name in grid_axes(type(settings)):
        value = getattr(settings, name)
        values = list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]
        if len({json.dumps(v, default=str) for v in values}) != len(values):
            raise InvalidParameterError(f"The {name!r} parameter of {type(settings).__name__} is a grid axis, whose "
                                        f"values must be distinct (one coordinate each); got {values}.")
        grid[name] = values
    return grid


def _model_axis(name: str) -> bool:
    return name in _MODEL_AXES or (name.startswith("lambda_") and name[7:].isdigit())


def point_settings(settings, point: dict, caller: str):
    """The settings of one grid point: the point's values in their fields, and the settings' ``model`` (a
    MultiHead) with the point's β, d, head strengths or spread put in."""
    out = replace(settings, **point)
    model = getattr(settings, "model", None)
    into_model = {k: v for k, v in point.items() if _model_axis(k)}
    if into_model and isinstance(model, MultiHead):
        try:
            out = replace(out, model=point_model(model, into_model, caller))
        except InvalidParameterError:
            raise InvalidParameterError(
                f"The grid axes {sorted(into_model)} of {caller} go into the settings' model (beta, d, lambda_<h> for "
                f"h < {model.n_heads}, spread), which cannot take the point {into_model}: d, lambda_<h> and spread "
                "need scalar heads M_h = W_h = lambda_h I (MultiHead.scalar). Give such heads, or name the axis "
                "otherwise (e.g. 'strength') and build the point's model in the cell from the settings.") from None
    return out


def grid_cell_key(study, settings, point: dict, seed_index: int, entropy) -> str:
    """The SHA-256 of everything a cell of the grid point ``point`` runs with (its settings ``settings``)."""
    model = getattr(settings, "model", None)
    blob = {"study": study.name, "point": point, "seed": seed_index, "entropy": str(entropy),
            "run": {k: getattr(settings, k) for k in RUN_SETTINGS[1:] if hasattr(settings, k)},
            "model": model_key(model) if isinstance(model, MultiHead) else None,
            "settings": json.loads(study.cell_key(settings))}
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()


def run_grid(study, settings, *, store=None, engine="serial", max_workers=None, progress=None,
             max_pool_restarts: int = 2) -> xr.Dataset:
    """The cells of every grid point x seed (``settings.n_seeds``) through the cell engine
    (:func:`metrics._runs.engine.run_cells`: verified, resumable, on its engines), assembled."""
    grid, n_seeds = grid_of(settings), int(settings.n_seeds)
    entropy = np.random.SeedSequence(getattr(settings, "seed", 0)).entropy
    points = grid_points(grid)
    at = [point_settings(settings, p, study.name) for p in points]  # (a point the model refuses: before any work)
    cells = [(tuple(p.values()), s, p) for p in points for s in range(n_seeds)]
    keys = [grid_cell_key(study, at[i // n_seeds], cells[i][2], cells[i][1], entropy) for i in range(len(cells))]
    if engine == "process":
        check_not_bootstrapping(study.name)
        check_picklable(job_args=(study.cell, at[0].for_cells()), caller=study.name,
                        named={"cell": study.cell, "settings": at[0]})

    def job(idx, path, key):
        _, s, point = cells[idx]
        return run_typed_cell, study.cell, point, s, at[idx // n_seeds].for_cells(), entropy, path, key

    label = study.label.format(sphere=settings.model.d - 1) if "{sphere}" in study.label else study.label
    results = run_cells(study.name, cells, keys, job, store=store, engine=engine, progress=progress, label=label,
                        max_workers=max_workers, max_pool_restarts=max_pool_restarts)
    failed = failed_cells(cells, results, tuple(grid))
    warn_failed(failed, len(cells), study.name)
    ds = _assemble(grid, n_seeds, results, at, grid_axes(type(settings)))
    ds.attrs["failed_cells"] = json.dumps(failed, default=str)
    ds.attrs.update(summation_attrs(results.values()))  # the cells' routes and largest bound, as a sweep's
    return ds


def grid_coords(grid: dict, long_names: dict, n_seeds: int) -> dict:
    """The coordinates of a grid study's axes (``long_name`` and ``units``) and of its ``seed``."""
    coords = {k: (k, np.asarray(v), {"long_name": long_names[k], "units": "1"}) for k, v in grid.items()}
    coords["seed"] = ("seed", np.arange(int(n_seeds)),
                      {"long_name": "seed index (SeedSequence spawn key)", "units": "1"})
    return coords


def _assemble(grid: dict, n_seeds: int, results: dict, at: list, long_names: dict) -> xr.Dataset:
    """One Dataset (dims: *axes, seed, the cells' own dims) from the finished cells, in grid order."""
    first, lead = results[0], tuple(len(v) for v in grid.values()) + (n_seeds,)
    data = {}
    for name, var in first.data_vars.items():
        if name == "status":
            continue
        dtype = float if np.issubdtype(var.dtype, np.number) or var.dtype == bool else object  # (ints: NaN-able)
        values = np.stack([np.asarray(results[i][name].values, dtype=dtype) for i in range(len(results))])
        attrs = {"long_name": name, "units": "1", **var.attrs}
        data[name] = (tuple(grid) + ("seed",) + var.dims, values.reshape(lead + var.shape), attrs)
    status = np.array([int(results[i]["status"]) for i in range(len(results))], dtype=np.int8).reshape(lead)
    data["success"] = (tuple(grid) + ("seed",), status, {"long_name": "1 if the run reached its end", "units": "1"})
    coords = grid_coords(grid, long_names, n_seeds)
    for name in first.dims:
        if name == "time":
            scales = [s.model.log_time_scale for s in at if isinstance(getattr(s, "model", None), MultiHead)]
            coords["time"] = time_coord(first["time"].values, scales[0] if len(set(scales)) == 1 else
                                        (np.asarray(scales) if scales else None))
        elif name in first.coords:
            coords[name] = (name, first[name].values, {"long_name": name, "units": "1", **first[name].attrs})
    return xr.Dataset(data, coords=coords)
