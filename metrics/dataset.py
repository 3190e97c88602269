"""xarray schema for headflow results: trajectories and diagnostics as labelled Datasets.

Conventions (CF-style): dims ``time``, ``particle``, ``component``, ``head``; every
variable and coordinate has ``long_name`` and ``units`` attrs (``"1"`` if dimensionless);
run parameters are Dataset attrs, netCDF-safe (no None, booleans as int, arrays as lists
of floats); ``title``, ``source`` and ``history`` are always set.

Write with the netCDF4 engine (xarray's default when netCDF4 is installed, and what
:func:`metrics.run_sweep` uses): the netCDF3 format of the ``scipy`` engine has no 64-bit
integers and narrows int64 coordinates (``particle``, ``seed``) to int32.
"""

from __future__ import annotations

import datetime as _dt

import numpy as np
import xarray as xr

from particles import DIAGNOSTICS, MultiHead, Trajectory, __version__
from particles.validation import InvalidParameterError, check_instance

__all__ = ["trajectory_to_dataset", "model_attrs", "netcdf_safe", "COORDS", "VARIABLES"]

COORDS = {
    "time": {"long_name": "time", "units": "1"},
    "particle": {"long_name": "token index", "units": "1"},
    "component": {"long_name": "ambient coordinate index", "units": "1"},
    "head": {"long_name": "attention head index", "units": "1"},
}

#: long name, units and trailing dims of every named variable a Dataset may hold
VARIABLES = dict(DIAGNOSTICS)
VARIABLES.update({
    "mean_entropy": ("token-averaged softmax attention entropy", "nat", ("head",)),
    "n_clusters": ("number of clusters (eps-connected components)", "1", ()),
    "largest_cluster": ("mass of the largest cluster", "1", ()),
    "w2_to_uniform": ("sliced W2 distance to the uniform measure", "rad", ()),
})


def netcdf_safe(attrs: dict) -> dict:
    """Turn attrs into netCDF-storable values (None → "none", bool → int, arrays → lists)."""
    if not isinstance(attrs, dict):
        raise InvalidParameterError(f"attrs of netcdf_safe must be a dict; got {type(attrs).__name__}.")
    out = {}
    for key, val in attrs.items():
        if not isinstance(key, str):
            raise InvalidParameterError(f"attrs of netcdf_safe must have string keys; got {key!r}.")
        if val is None:
            val = "none"
        elif isinstance(val, (bool, np.bool_)):
            val = int(val)
        elif isinstance(val, np.ndarray):
            val = val.astype(float).ravel().tolist() if val.size > 1 else float(val.ravel()[0])
        elif isinstance(val, (np.integer,)):
            val = int(val)
        elif isinstance(val, (np.floating,)):
            val = float(val)
        elif isinstance(val, (list, tuple)):
            val = [float(v) for v in val] if all(isinstance(v, (int, float, np.number)) for v in val) else str(val)
        elif not isinstance(val, (int, float, str)):
            val = str(val)
        out[key] = val
    return out


def model_attrs(model: MultiHead) -> dict:
    """Run parameters of a model as netCDF-safe attrs (matrices flattened, with their shape)."""
    check_instance(model, MultiHead, "model", "model_attrs")
    return netcdf_safe({
        "kind": model.kind,
        "geometry": model.geometry,
        "beta": model.beta,
        "n_heads": model.n_heads,
        "d": model.d,
        "log_time_scale": model.log_time_scale,
        "score_symmetric": model.symmetric,
        "value_aligned": model.aligned,
        "M": model.M,
        "W": model.W,
        "matrix_shape": list(model.M.shape),
    })


def trajectory_to_dataset(traj: Trajectory, model: MultiHead | None = None, *, title: str = "headflow trajectory",
                          attrs: dict | None = None) -> xr.Dataset:
    """Convert a :class:`particles.Trajectory` into an ``xr.Dataset``.

    ``positions`` (time, particle, component) when stored; each saved statistic with the
    dims of :data:`particles.DIAGNOSTICS` when its name is known there, else generic dims
    ``<name>_dim<k>``.

    Examples
    --------
    >>> import particles
    >>> model = particles.MultiHead.scalar([1.0], d=3, beta=1.0, kind="softmax")
    >>> traj = particles.simulate(np.eye(3), model, t1=0.5, dt=0.1)
    >>> ds = trajectory_to_dataset(traj, model)
    >>> ds.positions.dims
    ('time', 'particle', 'component')
    """
    caller = "trajectory_to_dataset"
    check_instance(traj, Trajectory, "traj", caller, hint="Pass the result of particles.simulate(...).")
    if model is not None:
        check_instance(model, MultiHead, "model", caller)
    if not isinstance(title, str):
        raise InvalidParameterError(f"The 'title' parameter of {caller} must be a string; got {title!r}.")
    if attrs is not None and not isinstance(attrs, dict):
        raise InvalidParameterError(f"The 'attrs' parameter of {caller} must be a dict or None; got {type(attrs).__name__}.")
    data_vars = {}
    if traj.x is not None:
        data_vars["positions"] = (("time", "particle", "component"), traj.x,
                                  {"long_name": "token positions on the sphere", "units": "1"})
    for name, arr in traj.saved.items():
        arr = np.asarray(arr)
        if name in VARIABLES:
            long_name, units, dims = VARIABLES[name]
        else:
            long_name, units, dims = name, "1", tuple(f"{name}_dim{k}" for k in range(arr.ndim - 1))
        if len(dims) != arr.ndim - 1:
            dims = tuple(f"{name}_dim{k}" for k in range(arr.ndim - 1))
        data_vars[name] = (("time",) + tuple(dims), arr, {"long_name": long_name, "units": units})
    ds = xr.Dataset(data_vars, coords={"time": ("time", np.asarray(traj.t, dtype=float), COORDS["time"])})
    for dim in ("particle", "component", "head"):
        if dim in ds.dims:
            ds = ds.assign_coords({dim: (dim, np.arange(ds.sizes[dim]), COORDS[dim])})
    base = {
        "title": title,
        "source": f"headflow {__version__}",
        "history": f"{_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} created by headflow",
        "Conventions": "CF-1.10",
        "status": traj.status,
        "message": traj.message,
        "method": traj.method,
        "n_steps": traj.n_steps,
    }
    if model is not None:
        base.update(model_attrs(model))
    base.update(netcdf_safe(attrs or {}))
    ds.attrs = netcdf_safe(base)
    return ds
