"""A cell's Dataset from a run's saved columns: the one NaN padding of sweeps and studies."""

from __future__ import annotations

import numpy as np
import xarray as xr


def columns_dataset(saved: dict, ts, success: bool, message: str, names=None) -> xr.Dataset:
    """A cell's Dataset (dim ``time`` = ``ts``) from the ``SaveAt(fn=...)`` columns ``saved`` (``names``:
    the columns it must have, default those saved): a failed run is cut at its last finite save, so its
    columns are NaN-padded (a column never saved is all NaN), ``status`` = 0 and ``failure_message`` says why."""
    ts = np.asarray(ts)
    data = {}
    for k in (saved if names is None else names):
        v = np.asarray(saved.get(k, []), dtype=float)
        data[k] = ("time", np.concatenate([v, np.full(len(ts) - len(v), np.nan)]))
    data["status"] = ((), int(success))
    return xr.Dataset(data, coords={"time": ("time", ts)}, attrs={"failure_message": "" if success else str(message)})


def saved_to_dataset(traj, ts) -> xr.Dataset:
    """:func:`columns_dataset` of a :class:`particles.Trajectory`'s saved columns, with the route of each
    head's sums and their largest error bound in its attrs (:func:`summation_cell_attrs`)."""
    ds = columns_dataset(traj.saved, ts, traj.success, traj.message)
    ds.attrs.update(summation_cell_attrs(traj.summation))
    return ds


def summation_cell_attrs(sums: dict) -> dict:
    """A cell's record of its sums (a trajectory's ``summation``): ``summation_route``, the route
    of each head (comma-joined), and ``summation_bound_max``, the largest a-posteriori relative error bound
    of a partition function; nothing for a run that recorded none (it failed before its first step)."""
    if not sums:
        return {}
    return {"summation_route": ", ".join(sums["route"]), "summation_bound_max": float(sums["bound_max"])}
