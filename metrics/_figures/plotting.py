r"""Figures of headflow's Datasets: metric curves against time, phase diagrams, the chaos study.

Every function takes the Dataset a headflow function made and returns the matplotlib Axes it
drew (a new figure unless ``ax`` is given); ``ds.attn`` has each as a method, and
``ds.attn.plot()`` draws the figure of the Dataset's kind. Axis labels are built from the
``long_name`` and ``units`` attrs (:func:`axis_label`: a dimensionless ``"1"`` is not printed).
The tokens themselves are drawn by :mod:`metrics._figures.animation`; the limit study by
:func:`metrics.plot_limit_study`. matplotlib is imported on first use only.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from particles import validation as pv
from particles.extend import ATTENTION_KINDS
from particles.validation import NONE, AnyOf, Boolean, Instance, Interval, InvalidParameterError, Options, declare

from .._studies.phase import PHASE_STATISTICS
from .curves import draw_curves
from .labels import DIMENSIONLESS, _span, axis_label, fit_text, label_axes, short_label  # noqa: F401 (re-exported)

__all__ = ["axis_label", "plot_curves", "plot_phase_diagram", "plot_chaos_collapse", "plot_chaos_horizon"]

#: variables plot_curves draws by default, in this order, when a Dataset has them (with a time dim)
CURVES = ("energy_multi", "mean_entropy", "n_clusters", "distance_to_uniform", "largest_cluster", "distance", "sw2",
          "w1", "clustered_pairs")


def _pyplot():
    import matplotlib.pyplot as plt

    return plt


def _dataset(needs: tuple, made_by: str):
    return Instance(xr.Dataset, test=lambda ds: all(v in ds.variables for v in needs),
                    what=f"an xarray.Dataset with {', '.join(repr(v) for v in needs)} (from {made_by})")


#: where a figure is drawn: None (a new figure) or a matplotlib Axes
AX = AnyOf(NONE, Instance(object, test=lambda a: hasattr(a, "plot") and hasattr(a, "figure"), what="a matplotlib Axes",
                          bad=(3, "ax", [1, 2])))


def _new_axes(ax, figsize=(5.5, 4.0)):
    if ax is None:
        # constrained layout: titles, labels and colour bars stay inside the figure at any size
        _, ax = _pyplot().subplots(figsize=figsize, layout="constrained")
    return ax


def _default_curves(ds: xr.Dataset) -> list:
    names = [v for v in CURVES if v in ds.data_vars and "time" in ds[v].dims]
    if _on_sphere(ds):
        # (model_attrs records the heads' kind; the attention entropy is drawn for attention-mean heads)
        rows = getattr(ATTENTION_KINDS.get(ds.attrs.get("kind")), "normalised", False)
        wanted = ("energy_multi", "mean_entropy", "n_clusters") if rows else ("energy_multi", "n_clusters")
        names = list(dict.fromkeys([*names, *wanted]))
    if ds.attrs.get("headflow_kind") == "sentence_flow" and "mean_cosine" in ds.data_vars:
        names.append("mean_cosine")
    if not names:
        where = "positions on the sphere (a flat run's are not)" if "positions" in ds.data_vars else "positions"
        raise InvalidParameterError(
            f"plot_curves found no curve to draw: the Dataset has no {list(CURVES)} over time and no {where}. "
            f"Name its variables: plot_curves(ds, names=[...]) (it has {sorted(ds.data_vars)}).")
    return names


def on_sphere(ds: xr.Dataset) -> bool:
    """The Dataset's tokens lie on the sphere (its model's geometry, when it records one)."""
    from particles import GEOMETRIES

    geometry = GEOMETRIES.get(ds.attrs.get("geometry"))
    return geometry is None or geometry.on_sphere


def _on_sphere(ds: xr.Dataset) -> bool:
    """Positions whose metrics (:data:`metrics.METRICS`, defined on the sphere) can be evaluated."""
    return "positions" in ds.data_vars and on_sphere(ds)


def _curve(ds: xr.Dataset, name) -> xr.DataArray:
    if isinstance(name, str) and name in ds.data_vars and "time" in ds[name].dims:
        return ds[name]
    from .._observables.registry import METRICS

    if isinstance(name, str) and name in METRICS and _on_sphere(ds):
        return ds.attn.metric(name)
    have = sorted(v for v in ds.data_vars if "time" in ds[v].dims)
    raise InvalidParameterError(
        f"The 'names' parameter of plot_curves lists {name!r}, which is neither a variable of the Dataset over time "
        f"({have}) nor, with positions on the sphere, a metric of metrics.METRICS ({sorted(METRICS)}).")


@declare(ds=Instance(xr.Dataset, what="an xarray.Dataset with a time dim"),
         names=AnyOf(NONE, pv.SequenceOf(Instance(str, test=lambda n: bool(n.strip()), what="a non-empty name"),
                                         hint="Pass a list of at least one variable or metric name, or None.")),
         axes=AnyOf(NONE, Instance(object, test=lambda a: all(hasattr(x, "plot") for x in np.ravel(np.asarray(
             a, dtype=object))), what="a sequence of matplotlib Axes", bad=(3, "axes", [1, 2]))),
         log_time=Boolean())
def plot_curves(ds: xr.Dataset, names=None, *, axes=None, log_time: bool = False):
    r"""Metrics against time, one panel each: energy :math:`E_{\rm multi}(t)`, attention entropy,
    cluster count, distances...

    On a trajectory (``positions``) a metric of :data:`metrics.METRICS` that is not stored is
    evaluated at each save (``ds.attn.metric``). A ``seed`` dim (sweeps, studies) is drawn as the
    seed mean with a ± one standard deviation band; any other dim (a sweep's grid, ``n_particles``,
    ``head``) gives one line per value.

    Parameters
    ----------
    ds : Dataset with a ``time`` dim (trajectory, sweep, limit or chaos study)
    names : list of str, optional
        Variables or metrics (default: those of :data:`CURVES` the Dataset has; on a trajectory
        also the energy, the entropy (softmax heads) and the cluster count).
    axes : sequence of matplotlib Axes, optional
        One per name (a new row of panels otherwise).
    log_time : bool
        Logarithmic time axis (saves at t <= 0 left out).

    Returns
    -------
    numpy array of matplotlib Axes

    Notes
    -----
    A curve whose positive values span more than two decades gets a logarithmic axis; a sentence
    flow's panels mark its layer boundaries (and add the mean cosine of the tokens).
    """
    if "time" not in ds.dims:
        raise InvalidParameterError(f"The 'ds' parameter of plot_curves must have a time dim; its dims are "
                                    f"{dict(ds.sizes)}.")
    names = _default_curves(ds) if names is None else list(names)
    curves = [_curve(ds, name) for name in names]  # all checked before anything is drawn
    axes = panel_axes(axes, names, "plot_curves")
    for ax, da in zip(axes, curves):
        draw_curves(ax, da, log_time)
        _layer_boundaries(ax, ds)
    return axes


def panel_axes(axes, names: list, caller: str) -> np.ndarray:
    """One Axes per name: a new row of panels (``axes=None``), or the ones given, as many as the names."""
    if axes is None:
        # constrained layout: long y labels and the x label stay inside the figure
        _, axes = _pyplot().subplots(1, len(names), figsize=(4.4 * len(names), 3.6), squeeze=False,
                                     layout="constrained")
    axes = np.ravel(np.asarray(axes, dtype=object))
    if len(axes) != len(names):
        raise InvalidParameterError(f"The 'axes' parameter of {caller} must hold one Axes per name "
                                    f"({len(names)}: {names}); got {len(axes)}.")
    return axes


def _layer_boundaries(ax, ds: xr.Dataset) -> None:
    """A sentence flow's layer boundaries k * layer_time, k = 1..L-1, as faint vertical lines."""
    if ds.attrs.get("headflow_kind") != "sentence_flow" or int(ds.attrs.get("n_layers", 1)) < 2:
        return
    tau = float(ds.attrs["layer_time"])
    for k in range(1, int(ds.attrs["n_layers"])):
        ax.axvline(k * tau, color="0.6", lw=0.6, ls=":", zorder=0)


@declare(ds=_dataset(("time", "success"), "metrics.phase_diagram"), statistic=Options(*PHASE_STATISTICS), ax=AX,
         axis=AnyOf(NONE, Instance(str, what="the name of a grid axis of the dataset")), curve=Boolean(),
         colorbar=Boolean())
def plot_phase_diagram(ds: xr.Dataset, statistic: str = "clustered_pairs", *, axis: str | None = None, ax=None,
                       curve: bool = True, colorbar: bool = True):
    r"""A phase diagram: the statistic (fraction of clustered pairs, or mean cluster count) over
    (grid axis, :math:`t`), with the equiangular hitting time :math:`t^*` (``theory_time``, drawn where the
    dataset has it and it is inside the saved times).

    Parameters
    ----------
    ds : Dataset of :func:`metrics.phase_diagram`
    statistic : {"clustered_pairs", "n_clusters"}
    axis : the grid axis along x (default: the dataset's one grid axis of more than one value; the others
        must be selected first, e.g. ``ds.sel(n=32)``)
    ax : matplotlib Axes, optional
    curve, colorbar : bool
        Draw the :math:`t^*` curve (when the dataset has one); add a colour bar.

    Returns
    -------
    matplotlib.axes.Axes
    """
    dims = [k for k in ds[statistic].dims if k != "time"]
    wide = [k for k in dims if ds.sizes[k] > 1] or dims
    axis = wide[0] if axis is None and len(wide) == 1 else axis
    if axis not in dims or any(ds.sizes[k] > 1 for k in dims if k != axis):
        raise InvalidParameterError(
            f"plot_phase_diagram draws one grid axis against time; the dataset's {statistic} has the grid axes "
            f"{dims}{'' if axis is None else f' and axis={axis!r}'}: pick one with axis=... and select one value "
            "of each other axis first, e.g. ds.isel(" + ", ".join(f"{k}=0" for k in dims if k != (axis or dims[-1]))
            + ").")
    da = ds[statistic].squeeze([k for k in dims if k != axis])
    ax = _new_axes(ax)
    da = da.transpose(axis, "time")
    values = ds[axis].values
    numeric = np.issubdtype(values.dtype, np.number)
    x = values if numeric else np.arange(len(values))
    fraction = statistic == "clustered_pairs"
    mesh = ax.pcolormesh(x, ds["time"].values, da.values.T, cmap="viridis", shading="nearest",
                         vmin=0 if fraction else None, vmax=1 if fraction else None)
    if not numeric:
        ax.set_xticks(x, [str(v) for v in values], fontsize=7)
    t_end = float(ds["time"][-1])
    if curve and "theory_time" in ds:
        tstar = ds["theory_time"].squeeze([k for k in dims if k != axis]).values
        keep = tstar <= t_end
        ax.plot(x[keep], tstar[keep], "w--", marker=".", lw=1.5, label=f"equiangular t*({axis})")
        # (a dark legend box: the white dashed curve is invisible on the default white one)
        ax.legend(loc="upper left", fontsize=7, facecolor="0.25", edgecolor="none", labelcolor="w")
        _note_curve_off_chart(ax, x, tstar, t_end, axis)
    a = ds.attrs
    title = ", ".join(f"{k} = {a[k]}" for k in ("n", "d") if a.get(k, "none") != "none")
    ax.set(ylim=(0, t_end))
    label_axes(ax, title=f"{a.get('kind', 'none') if a.get('kind', 'none') != 'none' else ''} {title}".strip(),
               xlabel=axis_label(ds[axis], axis), ylabel=axis_label(ds["time"], "time"))
    if colorbar:
        bar = ax.figure.colorbar(mesh, ax=ax)
        bar.set_label(fit_text(axis_label(da).replace("mean over systems of the ", ""), 0.75 * _span(ax)[1], 8),
                      fontsize=8)
    return ax


def _note_curve_off_chart(ax, x, tstar, t_end: float, axis: str = "beta") -> None:
    """Say where t* leaves the chart (above T, or infinite), with an arrow to the top edge (NaN: no law there)."""
    off = ~(tstar <= t_end) & ~np.isnan(tstar)
    if not off.any():
        return
    b0, name = float(x[off].min()), "β" if axis == "beta" else axis
    where = f"{name} ≥ {b0:g}" if np.all(off[x >= b0]) else f"{name} = " + ", ".join(f"{b:g}" for b in x[off])
    ax.annotate(f"t*({name}) > T = {t_end:g} for {where}", xy=(b0, t_end), xycoords="data", xytext=(0.97, 0.9),
                textcoords="axes fraction", ha="right", va="top", color="w", fontsize=7,
                arrowprops={"arrowstyle": "->", "color": "w"})


def noise_label(kappa) -> str:
    """The noise of a run for titles: kappa is the inverse temperature of the Brownian part, inf none.

    >>> noise_label(float("inf")), noise_label(20.0)
    ('noiseless (kappa = inf)', 'noise kappa = 20')
    """
    return "noiseless (kappa = inf)" if np.isinf(float(kappa)) else f"noise kappa = {float(kappa):.3g}"


def chaos_parameters(ds: xr.Dataset) -> str:
    """One line of a chaos study's parameters (those it records), for titles."""
    a = ds.attrs
    parts = [f"{a['kind']} H={a.get('n_heads', '?')} beta={a['beta']:g} on $S^{{{int(a['d']) - 1}}}$"] if (
        {"kind", "beta", "d"} <= set(a)) else []
    if "kappa" in a:
        parts.append(noise_label(a["kappa"]))
    parts.append(f"sigma*={float(ds['sigma_star']):.3f}")
    if "l_star" in ds:
        parts.append(f"l*={int(ds['l_star'])}")
    return ", ".join(parts + [f"seeds={ds.sizes.get('seed', 1)}"])


@declare(ds=_dataset(("distance", "sigma_star", "n_particles"), "metrics.chaos_horizon_study"), collapse=Boolean(),
         ax=AX)
def plot_chaos_collapse(ds: xr.Dataset, *, ax=None, collapse: bool = True):
    r"""The chaos study's distance to the mean field, seed mean per n, against
    :math:`t - \log n/(2\sigma^*)`: the fluctuation :math:`W\sim n^{-1/2}e^{\sigma^* t}
    = e^{\sigma^*(t - \log n/(2\sigma^*))}` makes the curves of every n collapse until breakdown.

    Parameters
    ----------
    ds : Dataset of :func:`metrics.chaos_horizon_study`
    ax : matplotlib Axes, optional
    collapse : bool
        Shift each curve by :math:`\log n/(2\sigma^*)` (needs :math:`\sigma^* > 0`); ``False``
        draws them against t.

    Returns
    -------
    matplotlib.axes.Axes
    """
    s = float(ds["sigma_star"])
    if collapse and not s > 0:
        raise InvalidParameterError(
            f"plot_chaos_collapse(collapse=True) shifts time by log(n) / (2 sigma*), which needs an unstable uniform "
            f"state; this study has sigma* = {s:.3g}. Pass collapse=False (stable regime: the distance stays "
            f"O(n^-1/2); see ds.sup_scaled_distance).")
    ax = _new_axes(ax)
    for i, n in enumerate(ds["n_particles"].values):
        w = ds["distance"].isel(n_particles=i).mean("seed")
        t = ds["time"].values - (np.log(n) / (2 * s) if collapse else 0.0)
        ax.semilogy(t, w.values, label=f"n = {int(n)}")
    if collapse:  # the linear theory's growth e^{σ* s}, through the largest n's first save
        w0 = float(ds["distance"].isel(n_particles=-1, time=0).mean("seed"))
        s0 = float(ds["time"][0]) - np.log(float(ds["n_particles"][-1])) / (2 * s)
        grid = np.array([s0, s0 + np.log(1.0 / w0) / s]) if w0 < 1 else np.array([s0, s0])
        ax.semilogy(grid, w0 * np.exp(s * (grid - s0)), "k:", lw=1, label="∝ exp(σ* (t - log(n) / (2 σ*)))")
    xlabel = "t - log(n) / (2 σ*)" if collapse else axis_label(ds["time"], "time")
    label_axes(ax, title=chaos_parameters(ds), xlabel=xlabel, ylabel=axis_label(ds["distance"]) + ", seed mean",
               title_size=8)
    ax.legend(fontsize=7)
    return ax


@declare(ds=_dataset(("t_delta", "sigma_star", "slope", "slope_ci"), "metrics.chaos_horizon_study"),
         delta=AnyOf(NONE, Interval(0, None, closed="neither")), ax=AX)
def plot_chaos_horizon(ds: xr.Dataset, delta: float | None = None, *, ax=None):
    r"""Breakdown time :math:`t_\delta` against :math:`\log n` (seed mean ± standard error), with
    the predicted line :math:`(\tfrac12\log n + \log\delta + E[Z])/\sigma^*` and the fitted slope
    against :math:`1/(2\sigma^*)` in the title.

    Parameters
    ----------
    ds : Dataset of :func:`metrics.chaos_horizon_study`
    delta : float, optional
        One of the study's thresholds (default: the largest).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    deltas = ds["delta"].values
    delta = float(deltas[-1]) if delta is None else delta
    if not np.any(np.isclose(deltas, delta, rtol=1e-12, atol=0)):
        raise InvalidParameterError(f"The 'delta' parameter of plot_chaos_horizon must be one of the study's "
                                    f"thresholds {deltas.tolist()}; got {delta!r}.")
    ax = _new_axes(ax)
    td = ds["t_delta"].sel(delta=delta, method="nearest")
    log_n = np.log(ds["n_particles"].values.astype(float))
    err = td.std("seed") / np.sqrt(td.count("seed"))
    ax.errorbar(log_n, td.mean("seed"), yerr=err, fmt="o", capsize=3, label="measured (seed mean)")
    z_mean = float(ds["horizon_z_law_mean"]) if "horizon_z_law_mean" in ds else float("nan")
    if np.isfinite(z_mean) and float(ds["sigma_star"]) > 0:
        line = (0.5 * log_n + np.log(delta) + z_mean) / float(ds["sigma_star"])
        ax.plot(log_n, line, "k--", label="theory (log n / 2 + log δ + E Z) / σ*")
    lo, hi = ds["slope_ci"].sel(delta=delta, method="nearest").values
    slope = float(ds["slope"].sel(delta=delta, method="nearest"))
    if np.isfinite(slope):  # the fitted line passes through the count-weighted centroid (metrics.fit_horizon_slope)
        w = td.count("seed").values / float(td.count("seed").sum())
        centre = float(w @ td.mean("seed").values)
        ax.plot(log_n, centre + slope * (log_n - w @ log_n), "C1-",
                label=f"fit: slope {slope:.3f} [{lo:.3f}, {hi:.3f}]")
    predicted = f" vs 1/(2σ*) = {float(ds['slope_predicted']):.3f}" if "slope_predicted" in ds else ""
    label_axes(ax, title=f"slope {slope:.3f} [{lo:.3f}, {hi:.3f}]{predicted}", xlabel="log n",
               ylabel=f"breakdown time t_δ (δ = {delta:g})")
    ax.legend(fontsize=7)
    return ax
