"""The ``ds.attn`` accessor: common metrics on a trajectory Dataset.

Registered once under the project-specific name ``attn``. Every method is a thin wrapper
around a plain function of :mod:`metrics`; nothing depends on the accessor. The schema is
checked when the accessor is created (``ValueError`` naming the missing variable).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from particles import MultiHead
from particles.summation import DEFAULT_TOL

from .registry import METRICS, evaluate
from .transport import wasserstein

__all__ = ["AttnAccessor", "model_from_attrs", "time_index"]


def time_index(ds: xr.Dataset, t, caller: str = "ds.attn", dim: str = "time") -> int:
    """Index of the saved time equal to ``t`` (by value, to within 1e-9 of the saved span).

    A time outside the saved range, or between two saved times, is an error naming the saved
    times: nothing snaps silently to the nearest save.

    >>> import xarray as xr
    >>> ds = xr.Dataset(coords={"time": [0.0, 0.5, 1.0]})
    >>> time_index(ds, 0.5)
    1
    >>> time_index(ds, 99.0)
    Traceback (most recent call last):
    ...
    particles.validation.InvalidParameterError: time 99.0 of ds.attn is outside the saved times [0, 1] ...
    """
    from particles.validation import InvalidParameterError

    if dim not in ds.coords:
        raise InvalidParameterError(f"{caller} needs a {dim!r} coordinate; the Dataset has {sorted(ds.coords)}.")
    ts = np.asarray(ds[dim].values, dtype=np.float64)
    shown = ", ".join(f"{v:g}" for v in ts[:8]) + (", ..." if len(ts) > 8 else "")
    if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)) or not np.isfinite(t):
        raise InvalidParameterError(f"time of {caller} must be a finite number (a saved time, by value); got {t!r}.")
    tol = 1e-9 * max(1.0, float(ts.max() - ts.min()))
    if not ts.min() - tol <= t <= ts.max() + tol:
        raise InvalidParameterError(
            f"time {t!r} of {caller} is outside the saved times [{ts.min():g}, {ts.max():g}] (saved: {shown}); "
            "times are selected by value, not by position: use ds.time.values[-1] for the last save.")
    k = int(np.argmin(np.abs(ts - t)))
    if abs(ts[k] - t) > tol:
        raise InvalidParameterError(
            f"time {t!r} of {caller} is not a saved time (nearest {ts[k]:g}; saved: {shown}); pass one of them.")
    return k


def model_from_attrs(attrs: dict) -> MultiHead:
    """Rebuild the :class:`particles.MultiHead` recorded by :func:`metrics.model_attrs`."""
    from collections.abc import Mapping

    from particles.validation import InvalidParameterError

    fix = "build the Dataset with metrics.trajectory_to_dataset(traj, model)."
    if not isinstance(attrs, Mapping):
        raise InvalidParameterError(f"attrs of model_from_attrs must be a dict (ds.attrs); got {type(attrs).__name__}.")
    try:
        shape = tuple(int(s) for s in np.atleast_1d(attrs["matrix_shape"]))
        M = np.asarray(attrs["M"], dtype=float).reshape(shape)
        W = np.asarray(attrs["W"], dtype=float).reshape(shape)
        return MultiHead(M, W, beta=float(attrs["beta"]), kind=str(attrs["kind"]), geometry=str(attrs["geometry"]),
                         log_time_scale=float(attrs["log_time_scale"]), summation=str(attrs.get("summation", "auto")),
                         tol=float(attrs.get("summation_tol", DEFAULT_TOL)))
    except KeyError as exc:
        raise InvalidParameterError(f"the Dataset attrs lack {exc.args[0]!r}: {fix}") from None
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"the Dataset attrs do not describe a valid model ({exc}): {fix}") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidParameterError(f"the Dataset attrs are malformed ({type(exc).__name__}: {exc}): {fix}") from None


@xr.register_dataset_accessor("attn")
class AttnAccessor:
    """Metrics over the ``time`` dim of a Dataset holding ``positions`` (time, particle, component)."""

    def __init__(self, ds: xr.Dataset):
        self._ds = ds

    def _positions(self) -> xr.DataArray:
        if "positions" not in self._ds:
            from particles.validation import InvalidParameterError

            raise InvalidParameterError("ds.attn needs a 'positions' variable (time, particle, component); "
                             "simulate with SaveAt(x=True).")
        return self._ds["positions"]

    @property
    def model(self) -> MultiHead:
        return model_from_attrs(self._ds.attrs)

    def metric(self, name: str) -> xr.DataArray:
        """Named metric of :data:`metrics.METRICS` at each time, as a DataArray (time,)."""
        from particles.validation import check_choice

        check_choice(name, "name", METRICS, "ds.attn.metric")
        m = METRICS[name]
        pos = self._positions()
        model = self.model if m.needs_model else None
        vals = [evaluate([name], pos.isel(time=k).values, None, model)[name] for k in range(pos.sizes["time"])]
        return xr.DataArray(np.asarray(vals), dims=("time",), coords={"time": pos.time}, name=name,
                            attrs={"long_name": m.long_name, "units": m.units})

    def n_clusters(self) -> xr.DataArray:
        return self.metric("n_clusters")

    def energy(self) -> xr.DataArray:
        return self.metric("energy_multi")

    def distance_to_uniform(self) -> xr.DataArray:
        return self.metric("distance_to_uniform")

    def wasserstein_between(self, t_a: float, t_b: float, p: float = 2.0) -> float:
        """Exact :math:`W_p` (geodesic cost) between the empirical measures at two times."""
        pos = self._positions()
        return wasserstein(pos.sel(time=t_a, method="nearest").values, pos.sel(time=t_b, method="nearest").values, p=p)
