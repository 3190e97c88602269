"""The Dataset of a finished sweep (:func:`metrics.run_sweep`): its cells' columns on the grid × seed × time."""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from particles import __version__

from .._data.dataset import KIND_ATTR, VARIABLES, time_coord
from .._data.provenance import netcdf_safe
from .._observables.registry import METRICS
from .models import describe_model_fn

#: the per-cell record of a default cell (its attrs): long name of each
CELL_RECORD = {
    "log_time_scale": "log_time_scale c of the cell's model (its time coordinate is t' = e^c t)",
    "model": "the cell's model: metrics.model_attrs as JSON (metrics.model_from_attrs(json.loads(.)) rebuilds it)",
}


def assemble(axes: dict, n_seeds: int, cells: list, results: dict, settings: dict, long_names: dict,
             fixed: dict) -> xr.Dataset:
    """One Dataset (dims: *grid keys, seed, time) from the finished cells; ``long_names`` names each
    swept parameter, ``fixed`` holds the values of those the grid does not sweep."""
    ts = settings["ts"]
    shape = tuple(len(v) for v in axes.values()) + (n_seeds, len(ts))
    var_names = [v for v in results[0].data_vars if v != "status"]
    arrays = {v: np.full(shape, np.nan) for v in var_names}
    status = np.zeros(shape[:-1], dtype=np.int8)
    messages = np.full(shape[:-1], "", dtype=object)
    record = {k: np.full(shape[:-1], np.nan if k == "log_time_scale" else "", dtype=float if k == "log_time_scale"
                         else object) for k in CELL_RECORD if all(k in r.attrs for r in results.values())}
    index = {k: {_hashable(val): i for i, val in enumerate(v)} for k, v in axes.items()}
    for idx, (values, s, _) in enumerate(cells):
        pos = tuple(index[k][_hashable(val)] for k, val in zip(axes, values)) + (s,)
        for v in var_names:
            arrays[v][pos] = results[idx][v].values
        status[pos] = int(results[idx]["status"])
        messages[pos] = str(results[idx].attrs.get("failure_message", ""))
        for k, arr in record.items():
            arr[pos] = results[idx].attrs[k]
    dims = tuple(axes) + ("seed", "time")
    coords = {k: (k, axis_values(k, v), {"long_name": long_names[k], "units": "1"}) for k, v in axes.items()}
    for k, v in axes.items():
        coords.update(head_strengths(k, v))
    coords["seed"] = ("seed", np.arange(n_seeds), {"long_name": "seed index (SeedSequence spawn key)", "units": "1"})
    coords["time"] = time_coord(ts, record.get("log_time_scale"))
    data_vars = {}
    for v in var_names:
        if v in METRICS:
            attrs = {"long_name": METRICS[v].long_name, "units": METRICS[v].units}
        else:
            long_name, units, _ = VARIABLES.get(v, (v, "1", ()))
            attrs = {"long_name": long_name, "units": units}
        data_vars[v] = (dims, arrays[v], attrs)
    for k, arr in record.items():  # object dtype: variable-length strings (netCDF, zarr v3)
        data_vars[k] = (dims[:-1], arr, {"long_name": CELL_RECORD[k], "units": "1"})
    data_vars["success"] = (dims[:-1], status, {"long_name": "1 if the run reached t1", "units": "1"})
    data_vars["failure_message"] = (dims[:-1], messages,
                                    {"long_name": "the solver's reason a run stopped before t1 (empty: it reached t1)",
                                     "units": "1"})
    attrs = netcdf_safe({
        "title": "headflow sweep",
        KIND_ATTR: "sweep",
        "source": f"headflow {__version__}",
        "history": "created by metrics.run_sweep",
        "seed_entropy": str(settings["entropy"]),
        "t1": settings["t1"], "dt": settings["dt"], "method": settings["method"], "kappa": settings["kappa"],
        "model_fn": describe_model_fn(settings["model_fn"]),
        **{f"fixed_{k}": v for k, v in fixed.items()},
        **summation_attrs(results.values()),
    })
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)


#: the attrs in which a sweep or a study records how its cells' attention sums were done
SUMMATION_ATTRS = ("summation_route", "summation_bound_max")


def summation_attrs(cells) -> dict:
    """The summation routes the cells took (each distinct per-head list once, ``"; "``-joined) and the
    largest a-posteriori error bound among them; nothing when no cell recorded its sums. Sweeps' own
    records merge the same way (a study or phase diagram over several sweeps)."""
    cells = [c for c in cells if "summation_route" in c.attrs]
    if not cells:
        return {}
    # (a sweep's own record, several lists "; "-joined, merges with others list by list)
    routes = {r for c in cells for r in str(c.attrs["summation_route"]).split("; ")}
    return {"summation_route": "; ".join(sorted(routes)),
            "summation_bound_max": max(float(c.attrs["summation_bound_max"]) for c in cells)}


def _hashable(value):
    return tuple(value) if isinstance(value, (list, tuple)) else value


def axis_values(name: str, values) -> np.ndarray:
    """A grid axis as coordinate values: numbers and strings as they are; lists of one head strength
    as that number (a numeric coordinate: ``ds.sel(lambdas=[1.0, 0.5])`` picks two cells); longer
    lists (several heads) as their JSON text, ``"[1.0, 0.5]"``, so the coordinate stays
    one-dimensional and selectable (:func:`head_strengths` gives them as numbers)."""
    if any(isinstance(v, (list, tuple)) for v in values):
        if all(isinstance(v, (list, tuple)) and len(v) == 1 for v in values):
            return np.array([float(v[0]) for v in values])
        return np.array([json.dumps([float(x) for x in v]) for v in values], dtype=object)
    return np.asarray(values)


def head_strengths(name: str, values) -> dict:
    """For an axis of lists of several head strengths, the numeric coordinate ``lambda_h`` (axis,
    lambda_head), NaN past a list's end; else nothing."""
    if not any(isinstance(v, (list, tuple)) for v in values) or all(len(v) == 1 for v in values):
        return {}
    width = max(len(v) for v in values)
    table = np.full((len(values), width), np.nan)
    for i, v in enumerate(values):
        table[i, :len(v)] = v
    return {"lambda_h": ((name, "lambda_head"), table, {"long_name": "head strength lambda_h (NaN: no such head)",
                                                        "units": "1"})}
