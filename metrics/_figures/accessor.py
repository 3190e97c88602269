"""The ``ds.attn`` accessor: metrics, times and plots on headflow's Datasets.

Registered under the project-specific name ``attn`` when :mod:`metrics` is imported (as cf_xarray
registers ``ds.cf``; ``headflow.metrics`` is the same module). Every method is
a thin wrapper around a plain function of :mod:`metrics`; nothing depends on the accessor.

It understands these kinds of Dataset (:attr:`AttnAccessor.kind`):

- ``"trajectory"``: a ``positions`` variable (time, particle, component), from
  :func:`metrics.trajectory_to_dataset` or ``headflow simulate``; every method works;
- ``"sweep"``: from :func:`metrics.run_sweep` (dims ``(*grid, seed, time)``, no positions): the
  metrics were evaluated during the runs, and :meth:`AttnAccessor.metric` returns the stored
  variable; methods that need positions say so;
- ``"study"``: from :func:`metrics.mean_field_limit_study`: :meth:`AttnAccessor.rate_table`
  and :meth:`AttnAccessor.plot_limit_study`;
- ``"phase"``: from :func:`metrics.phase_diagram` (:meth:`AttnAccessor.plot_phase_diagram`);
- ``"chaos"``: from :func:`metrics.chaos_horizon_study` (:meth:`AttnAccessor.plot_chaos_collapse`,
  :meth:`AttnAccessor.plot_chaos_horizon`);
- ``"head_geometry"``: from :func:`metrics.head_geometry` (:meth:`AttnAccessor.plot_head_geometry`);
- ``"sentence_flow"``: from :func:`metrics.sentence_flow` (its curves, :meth:`AttnAccessor.plot_curves`);
- a study of one's own (:mod:`metrics.extend`) over grid axes: :meth:`AttnAccessor.plot_study`.

:meth:`AttnAccessor.plot` draws the figure of each kind (:mod:`metrics._figures.plotting`,
:mod:`metrics._figures.animation`); :meth:`AttnAccessor.animate` writes the tokens' animation.

Times are selected by value (:func:`time_index`): a time outside the saved range is an error,
never snapped to the nearest save.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xarray as xr

from particles import MultiHead
from particles.validation import Instance, declare, keyword_only

from .._data.dataset import DATASET_KINDS, KIND_ATTR, time_index
from .._observables.registry import METRICS, evaluate
from .._observables.transport import wasserstein

__all__ = ["AttnAccessor", "model_from_attrs", "time_index"]


@declare(attrs=Instance(Mapping, what="a mapping of attrs written by metrics.model_attrs (e.g. ds.attrs)"))
def model_from_attrs(attrs: dict) -> MultiHead:
    """Rebuild the :class:`particles.MultiHead` recorded by :func:`metrics.model_attrs`
    (:meth:`particles.MultiHead.from_attrs`)."""
    return MultiHead.from_attrs(attrs)


if getattr(vars(xr.Dataset).get("attn"), "_accessor", None) is not None and getattr(
        xr.Dataset.attn, "__headflow_stand_in__", False):
    del xr.Dataset.attn  # the stand-in of `import headflow` (headflow/_accessor.py) gives way to the accessor


@xr.register_dataset_accessor("attn")
class AttnAccessor:
    """``ds.attn``: metrics over the ``time`` dim of a trajectory, sweep or limit-study Dataset.

    Examples
    --------
    >>> import numpy as np, particles, metrics
    >>> model = particles.MultiHead.scalar([1.0], d=3, beta=1.0)
    >>> x0 = particles.sample_uniform(8, d=3, rng=np.random.default_rng(0))
    >>> traj = particles.simulate(x0, model, t1=0.2, dt=0.1, save=particles.SaveAt(ts=[0.0, 0.1, 0.2]))
    >>> ds = metrics.trajectory_to_dataset(traj, model)
    >>> ds.attn.kind, ds.attn.n_clusters().dims
    ('trajectory', ('time',))
    >>> ds.attn.wasserstein_between(0.0, 0.2) > 0
    True
    """

    def __init__(self, ds: xr.Dataset):
        self._ds = ds

    @property
    def kind(self) -> str:
        """What the Dataset is: its ``headflow_kind`` attr, written where it was made (one of
        :data:`metrics._data.dataset.DATASET_KINDS`: ``"trajectory"``, ``"sweep"``, ``"study"``,
        ``"chaos"``, ``"phase"``, ``"head_geometry"``, ``"sentence_flow"``), or ``"other"``. A file
        written before datasets said so is recognised by its variables."""
        ds = self._ds
        kind = ds.attrs.get(KIND_ATTR)
        if kind in DATASET_KINDS:
            return kind
        if isinstance(kind, str) and kind:  # a study of the user's own (metrics.extend) names its kind
            return kind
        return _kind_from_variables(ds)

    def _positions(self, method: str) -> xr.DataArray:
        if "positions" not in self._ds:
            from particles.validation import InvalidParameterError

            kind = self.kind
            why = {"sweep": "this is a sweep Dataset (metrics.run_sweep), which keeps metrics, not positions: "
                            "read its variables directly (e.g. ds['n_clusters']) or ds.attn.metric(name)",
                   "study": "this is a limit-study Dataset: use ds.attn.rate_table() or ds.attn.plot_limit_study()",
                   }.get(kind, "simulate with SaveAt(x=True) and build it with metrics.trajectory_to_dataset")
            raise InvalidParameterError(
                f"ds.attn.{method} needs a 'positions' variable (time, particle, component); {why}. "
                f"The Dataset has {sorted(self._ds.data_vars)}.")
        pos = self._ds["positions"]
        extra = [d for d in pos.dims if d not in ("time", "particle", "component")]
        if extra:  # runs concatenated along a new dim: the metrics take one cloud (particle, component) per time
            from particles.validation import InvalidParameterError

            sizes = ", ".join(f"{d} ({pos.sizes[d]})" for d in extra)
            raise InvalidParameterError(
                f"ds.attn.{method} needs the positions of one run, over (time, particle, component); these also "
                f"have the dim(s) {sizes}. Select one first: ds.isel({extra[0]}=0) or ds.sel({extra[0]}=...).")
        return pos

    @property
    def model(self) -> MultiHead:
        """The :class:`particles.MultiHead` recorded in the attrs (:func:`model_from_attrs`): a trajectory's,
        a study's or a sentence flow's; a sweep holds one model per grid point (its coordinates say which)."""
        if "matrix_shape" not in self._ds.attrs:
            from particles.validation import InvalidParameterError

            why = {"sweep": "a sweep runs one model per point of its grid: its coordinates (e.g. ds.beta) and "
                            "ds.attrs['config'] give them",
                   "head_geometry": "a head geometry describes trained layers, not one model: load them with "
                                    "particles.load_attention_layers"}.get(
                self.kind, "its attrs lack the model's record ('matrix_shape' and the fields MultiHead.to_attrs "
                           "writes): dropped by an xarray operation (keep_attrs=True keeps them), or built by hand")
            raise InvalidParameterError(f"ds.attn.model reads the model a Dataset records (metrics.trajectory_to_"
                                        f"dataset writes it); this {self.kind} Dataset records none: {why}.")
        from .study_plot import study_axes

        varied = [a for a in study_axes(self._ds) if a in ("beta", "d", "spread") or a.startswith("lambda_")]
        if varied:  # the attrs hold the model the study was given; each grid point ran it with its own values
            from particles.validation import InvalidParameterError

            raise InvalidParameterError(
                f"ds.attn.model: this study runs one model per point of its grid axes {varied} (its coordinates hold "
                f"each point's values; the attrs the model it was given, without them). Rebuild a point's model with "
                f"metrics.model_from_attrs({{**ds.attrs, {varied[0]!r}: ...}}) where the axis is a MultiHead field.")
        return model_from_attrs(self._ds.attrs)

    def metric(self, name: str) -> xr.DataArray:
        """Named metric of :data:`metrics.METRICS` at each time.

        On a trajectory it is evaluated on the positions, as a DataArray (time,); on a sweep it is
        the variable the runs stored (dims of the sweep), or an error listing the stored ones.
        """
        from particles.validation import InvalidParameterError, check_choice

        check_choice(name, "name", METRICS, "ds.attn.metric")
        m = METRICS[name]
        if "positions" not in self._ds and name in self._ds:
            return self._ds[name]
        if "positions" not in self._ds and self.kind == "sweep":
            stored = sorted(v for v in self._ds.data_vars if v in METRICS)
            raise InvalidParameterError(
                f"metric {name!r} was not evaluated in this sweep (stored: {stored}); rerun metrics.run_sweep with "
                f"metrics=[..., {name!r}].")
        pos = self._positions(f"metric({name!r})")
        model = self.model if m.needs_model else None
        vals = [evaluate([name], pos.isel(time=k).values, None, model)[name] for k in range(pos.sizes["time"])]
        return xr.DataArray(np.asarray(vals), dims=("time",), coords={"time": pos.time}, name=name,
                            attrs={"long_name": m.long_name, "units": m.units})

    def n_clusters(self) -> xr.DataArray:
        """Number of clusters at each time (``metric("n_clusters")``)."""
        return self.metric("n_clusters")

    def energy(self) -> xr.DataArray:
        """Multi-head energy at each time (``metric("energy_multi")``)."""
        return self.metric("energy_multi")

    def distance_to_uniform(self) -> xr.DataArray:
        """Distance of the empirical measure to the uniform one (``metric("distance_to_uniform")``)."""
        return self.metric("distance_to_uniform")

    def time_index(self, t: float) -> int:
        """Index of the saved time ``t`` (by value; outside the saved range is an error)."""
        return time_index(self._ds, t, "ds.attn")

    def at(self, t: float) -> xr.Dataset:
        """The Dataset at the saved time ``t``, selected by value (``ds.isel(time=ds.attn.time_index(t))``)."""
        return self._ds.isel(time=self.time_index(t))

    @keyword_only("p")
    def wasserstein_between(self, t_a: float, t_b: float, *, p: float = 2.0) -> float:
        r"""Exact :math:`W_p` (geodesic cost, :func:`metrics.wasserstein`) between the empirical
        measures at two saved times, selected by value (``t_b = -1`` is not "the last save": it is
        outside the saved range and raises; use ``float(ds.time[-1])``)."""
        pos = self._positions("wasserstein_between")
        ka, kb = self.time_index(t_a), self.time_index(t_b)
        return wasserstein(pos.isel(time=ka).values, pos.isel(time=kb).values, p=p)

    def rate_table(self, time: float = 0.0, variables=None):
        """The limit study's table at one save time, a pandas DataFrame (:func:`metrics.limit_study_frame`):
        rows n and ``"rate"``, columns (gap, statistic); ``metrics.limit_study_table(ds, time=t)`` is the text."""
        from .report import limit_study_frame

        return limit_study_frame(self._ds, time=time, variables=variables)

    def plot_limit_study(self, var: str | None = None, **kwargs):
        """The limit study's log-log panel (:func:`metrics.plot_limit_study`); returns the Axes."""
        from .report import plot_limit_study

        return plot_limit_study(self._ds, var, **kwargs)

    def plot_curves(self, names=None, **kwargs):
        """Metrics against time, one panel each (:func:`metrics.plot_curves`); returns the Axes."""
        from .plotting import plot_curves

        return plot_curves(self._ds, names, **kwargs)

    def plot_angles(self, **kwargs):
        """Tokens on S^1 as angles against time (:func:`metrics.plot_angles`); returns the Axes."""
        from .animation import plot_angles

        return plot_angles(self._ds, **kwargs)

    def plot_sphere(self, time: float | None = None, **kwargs):
        """Tokens at one saved time on the circle or the shaded sphere (:func:`metrics.plot_sphere`)."""
        from .animation import plot_sphere

        return plot_sphere(self._ds, time, **kwargs)

    def animate(self, path, **kwargs):
        """Write the tokens' animation, MP4 or GIF by the suffix (:func:`metrics.animate`); returns the path."""
        from .animation import animate

        return animate(self._ds, path, **kwargs)

    def plot_phase_diagram(self, statistic: str = "clustered_pairs", **kwargs):
        """The phase diagram over its grid axis, with the equiangular t* curve where the dataset has one
        (:func:`metrics.plot_phase_diagram`)."""
        from .plotting import plot_phase_diagram

        return plot_phase_diagram(self._ds, statistic, **kwargs)

    def plot_chaos_collapse(self, **kwargs):
        """The chaos study's distance against t - log(n)/(2 sigma*) (:func:`metrics.plot_chaos_collapse`)."""
        from .plotting import plot_chaos_collapse

        return plot_chaos_collapse(self._ds, **kwargs)

    def plot_chaos_horizon(self, delta: float | None = None, **kwargs):
        """Breakdown time against log n with the prediction (:func:`metrics.plot_chaos_horizon`)."""
        from .plotting import plot_chaos_horizon

        return plot_chaos_horizon(self._ds, delta, **kwargs)

    def plot_head_geometry(self, names=None, **kwargs):
        """A head geometry's variables per layer, a box per layer each (:func:`metrics.plot_head_geometry`)."""
        from .geometry_plot import plot_head_geometry

        return plot_head_geometry(self._ds, names, **kwargs)

    def plot_study(self, names=None, **kwargs):
        """A study's variables over its grid axes (:func:`metrics.plot_study`): the first axis on x, one line
        per value of the others, the seed mean with its standard error; returns the Axes."""
        from .study_plot import plot_study

        return plot_study(self._ds, names, **kwargs)

    def plot(self, **kwargs):
        """The figure of this kind of Dataset: the tokens of a trajectory (angles over time on S^1,
        the shaded sphere at the last save on S^2, metric curves otherwise), a sweep's curves, the
        phase diagram, the chaos collapse, the limit study's log-log panel, a head geometry's
        variables per layer, a study of one's own over grid axes (:mod:`metrics.extend`): its variables
        over its grid."""
        kind = self.kind
        from .study_plot import study_axes

        if kind not in DATASET_KINDS and study_axes(self._ds):
            return self.plot_study(**kwargs)
        if kind == "other" and "time" not in self._ds.dims:  # nothing to draw by kind, nor curves over time
            from particles.validation import InvalidParameterError

            first = next(iter(self._ds.data_vars), "name")
            raise InvalidParameterError(
                f"ds.attn.plot() draws the figure of a Dataset headflow made (its '{KIND_ATTR}' attr: one of "
                f"{', '.join(DATASET_KINDS)}); this one has none and no time dim (dims {dict(self._ds.sizes)}). Plot "
                f"its variables with xarray, e.g. ds['{first}'].plot().")
        if kind == "sentence_flow":  # tokens on S^{d-1} for large d: the curves, one panel per quantity
            return self.plot_curves(**kwargs)
        from .plotting import on_sphere

        if kind == "trajectory" and on_sphere(self._ds):  # (flat tokens: their curves)
            d = self._ds.sizes.get("component")
            return {2: self.plot_angles, 3: self.plot_sphere}.get(d, self.plot_curves)(**kwargs)
        return {"study": self.plot_limit_study, "phase": self.plot_phase_diagram, "chaos": self.plot_chaos_collapse,
                "head_geometry": self.plot_head_geometry}.get(kind, self.plot_curves)(**kwargs)


def _kind_from_variables(ds: xr.Dataset) -> str:
    """The kind of a Dataset without a ``headflow_kind`` attr (written before datasets said what they are)."""
    if "positions" in ds:
        return "trajectory"
    if "sigma_star" in ds and "t_delta" in ds:
        return "chaos"
    if any(v.startswith("rate_") and v.endswith("_ci") for v in ds.data_vars):
        return "study"
    if "theory_time" in ds and "beta" in ds.dims:
        return "phase"
    if "seed" in ds.dims and "time" in ds.dims:
        return "sweep"
    return "other"

