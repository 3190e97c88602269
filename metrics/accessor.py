"""The ``ds.attn`` accessor: common metrics on a trajectory Dataset.

Registered once under the project-specific name ``attn``. Every method is a thin wrapper
around a plain function of :mod:`metrics`; nothing depends on the accessor. The schema is
checked when the accessor is created (``ValueError`` naming the missing variable).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from particles import MultiHead

from .registry import METRICS, evaluate
from .transport import wasserstein

__all__ = ["AttnAccessor", "model_from_attrs"]


def model_from_attrs(attrs: dict) -> MultiHead:
    """Rebuild the :class:`particles.MultiHead` recorded by :func:`metrics.model_attrs`
    (:meth:`particles.MultiHead.from_attrs`)."""
    return MultiHead.from_attrs(attrs)


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
