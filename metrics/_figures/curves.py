"""Curves of a Dataset variable against time (:func:`metrics.plot_curves`' panels): one line per
combination of the non-time dims, a seed dim drawn as the seed mean with a band."""

from __future__ import annotations

import numpy as np
import xarray as xr

from particles.validation import InvalidParameterError

from .labels import axis_label, label_axes

#: curves one panel may hold (more is refused, naming the dim to select)
MAX_LINES = 16
#: line styles of successive colour cycles: a panel of 12 heads repeats no (colour, style) pair
_STYLES = ("-", "--")


def _line_label(da: xr.DataArray, sel: dict) -> str:
    parts = []
    for dim, i in sel.items():
        v = da[dim].values[i] if dim in da.coords else i
        parts.append(f"{dim} = {v:g}" if isinstance(v, (int, float, np.number)) else f"{dim} = {v}")
    return ", ".join(parts)


def _log_scale(values: np.ndarray) -> bool:
    """Positive values over more than two decades: on one linear axis all but the largest are flat."""
    values = values[np.isfinite(values)]
    return bool(values.size) and values.min() > 0 and values.max() > 100 * values.min()


def draw_curves(ax, da: xr.DataArray, log_time: bool) -> None:
    """One line per combination of the non-time dims. A seed dim becomes the seed mean with a band:
    ± one standard deviation on a linear axis; on a logarithmic one (positive values over decades)
    the range over the seeds, since mean - sd may be negative there and cannot be drawn."""
    mean = da.mean("seed") if "seed" in da.dims else da
    others = [d for d in mean.dims if d != "time"]
    shape = [mean.sizes[d] for d in others]
    if int(np.prod(shape, dtype=int)) > MAX_LINES:
        raise InvalidParameterError(
            f"{da.name!r} has {int(np.prod(shape))} curves over {others} (more than {MAX_LINES}): select some first, "
            f"e.g. plot_curves(ds.isel({others[0]}=[0, 1]), [{da.name!r}]).")
    log = _log_scale(np.asarray(mean.values, dtype=float))
    band, note = _band(da, log)
    t = mean["time"].values
    keep = t > 0 if log_time else np.ones(t.shape, bool)
    for k, idx in enumerate(np.ndindex(*shape)):
        sel = dict(zip(others, idx))
        y = mean.isel(sel).transpose("time").values[keep]
        (line,) = ax.plot(t[keep], y, ls=_STYLES[k // 10 % len(_STYLES)], label=_line_label(mean, sel) or None)
        if band is not None:
            lo, hi = (b.isel(sel).transpose("time").values[keep] for b in band)
            ax.fill_between(t[keep], lo, hi, color=line.get_color(), alpha=0.25, lw=0)
    ax.set(xscale="log" if log_time else "linear")
    label_axes(ax, title=str(da.name), xlabel=axis_label(da["time"], "time"), ylabel=axis_label(da) + note)
    if log:
        ax.set_yscale("log")  # values over decades (a trained flow's energy: 4e7 to 0.06) on one linear axis are flat
    values = mean.values[np.isfinite(mean.values)]
    if values.size and np.array_equal(values, np.round(values)):  # a count: integer ticks, not 59.75
        from matplotlib.ticker import MaxNLocator

        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if others:
        ax.legend(fontsize=7)


def _band(da: xr.DataArray, log: bool):
    """The band's (lower, upper) edges over the seeds and the label's note; (None, "") without seeds."""
    if "seed" not in da.dims:
        return None, ""
    if log:
        return (da.min("seed"), da.max("seed")), " (seed mean, range)"
    mean, sd = da.mean("seed"), da.std("seed")
    return (mean - sd, mean + sd), " (seed mean ± sd)"
