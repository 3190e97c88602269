"""A cell's Dataset from a run's saved columns: the one NaN padding of sweeps and studies."""

from __future__ import annotations

import numpy as np
import xarray as xr


def saved_to_dataset(traj, ts) -> xr.Dataset:
    """A study cell's Dataset (dim ``time`` = ``ts``) from the ``SaveAt(fn=...)`` columns of ``traj``;
    a failed run is cut at its last finite save, so its columns are NaN-padded and ``status`` = 0."""
    ts = np.asarray(ts)
    data = {}
    for k, v in traj.saved.items():
        v = np.asarray(v, dtype=float)
        data[k] = ("time", np.concatenate([v, np.full(len(ts) - len(v), np.nan)]))
    data["status"] = ((), int(traj.success))
    return xr.Dataset(data, coords={"time": ("time", ts)},
                      attrs={"failure_message": "" if traj.success else str(traj.message)})
