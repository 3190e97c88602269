"""xarray schema for headflow results: trajectories and diagnostics as labelled Datasets.

Conventions (CF-style): dims ``time``, ``particle``, ``component``, ``head``; every
variable and coordinate has ``long_name`` and ``units`` attrs (``"1"`` if dimensionless);
run parameters are Dataset attrs, netCDF-safe (no None, booleans as int, arrays as lists
of floats); ``title``, ``source`` and ``history`` are always set.
"""

from __future__ import annotations

import datetime as _dt

import numpy as np
import xarray as xr

from particles import DIAGNOSTICS, MultiHead, Trajectory, __version__

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
    out = {}
    for key, val in attrs.items():
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
        "summation": model.summation,
        "summation_tol": model.tol,
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
    if "summation_bound" in traj.saved:
        # the largest bound met along the run: every saved diagnostic is within it
        base["summation_bound_max"] = float(np.max(traj.saved["summation_bound"]))
        base["summation_fast_fraction"] = float(np.mean(traj.saved["summation_fast"]))
    base.update(netcdf_safe(attrs or {}))
    ds.attrs = netcdf_safe(base)
    return ds
