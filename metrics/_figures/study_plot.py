"""A grid study's variables over its grid (:func:`metrics.plot_study`, ``ds.attn.plot()`` of a study written
with :mod:`metrics.extend` over grid axes): the first axis on x, one line per value of the others, the seed
mean with its standard error."""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from particles.validation import NONE, AnyOf, Instance, InvalidParameterError, SequenceOf, declare

from .curves import MAX_LINES, _line_label
from .labels import axis_label, label_axes
from .plotting import panel_axes

__all__ = ["plot_study", "study_axes"]

#: variables of a study that describe its runs rather than measure something
_BOOKKEEPING = ("success", "n_seeds_run", "failure_message", "status")


def study_axes(ds: xr.Dataset) -> list:
    """The grid axes a study records (its ``grid_axes`` attr, JSON), [] when it records none."""
    try:
        axes = json.loads(ds.attrs.get("grid_axes", "[]"))
    except (TypeError, ValueError):
        return []
    return [a for a in axes if a in ds.dims] if isinstance(axes, list) else []


def _drawable(ds: xr.Dataset, name: str, axes: list) -> bool:
    da = ds[name]
    return (axes[0] in da.dims and set(da.dims) <= set(axes) | {"seed", "time"} and np.issubdtype(da.dtype, np.number)
            and name not in _BOOKKEEPING and not name.endswith(("_se", "_stderr")))


@declare(ds=Instance(xr.Dataset, test=lambda ds: bool(study_axes(ds)),
                     what="an xarray.Dataset of a study over grid axes (its 'grid_axes' attr names them)"),
         names=AnyOf(NONE, SequenceOf(Instance(str), min_len=1)))
def plot_study(ds: xr.Dataset, names=None, *, axes=None):
    """A study's variables over its grid, one panel each: the first grid axis on x and one line per value of
    the others. A variable with a ``seed`` dim is drawn as the seed mean with error bars of its standard error
    (standard deviation over the seeds / sqrt(their count)); one without, with the bars of its ``<name>_se``
    when the Dataset has it. A variable over time is drawn at the last save.

    Parameters
    ----------
    ds : a Dataset whose ``grid_axes`` attr names its grid axes (:func:`metrics.extend.study_attrs` writes it)
    names : variables to draw (default: every numeric one over the grid, but ``success`` and standard errors)
    axes : sequence of matplotlib Axes, optional; one per name

    Returns
    -------
    numpy array of matplotlib Axes
    """
    grid = study_axes(ds)
    names = [v for v in ds.data_vars if _drawable(ds, v, grid)] if names is None else list(names)
    bad = [v for v in names if v not in ds.data_vars or not _drawable(ds, v, grid)]
    if bad or not names:
        raise InvalidParameterError(
            f"The 'names' parameter of plot_study must name variables over the grid axis {grid[0]!r} (and "
            f"{grid[1:] + ['seed', 'time']} at most); got {bad or names}. The Dataset has {sorted(ds.data_vars)}.")
    panels = panel_axes(axes, names, "plot_study")
    for ax, name in zip(panels, names):
        _draw(ax, ds, name, grid)
    return panels


def _draw(ax, ds: xr.Dataset, name: str, grid: list) -> None:
    da, note = ds[name], ""
    if "time" in da.dims:
        da, note = da.isel(time=-1), f" at time {float(ds.time[-1]):g}"
    if "seed" in da.dims:
        mean, se = da.mean("seed"), da.std("seed", ddof=1) / np.sqrt(da.count("seed"))
        note += " (seed mean ± se)"
    else:
        mean, se = da, ds.get(f"{name}_se")
    others = [d for d in mean.dims if d != grid[0]]
    shape = [mean.sizes[d] for d in others]
    if int(np.prod(shape, dtype=int)) > MAX_LINES:
        raise InvalidParameterError(f"{name!r} has {int(np.prod(shape))} lines over {others} (more than "
                                    f"{MAX_LINES}): select some first, e.g. ds.isel({others[0]}=[0, 1]).")
    x = ds[grid[0]].values
    for idx in np.ndindex(*shape):
        sel = dict(zip(others, idx))
        y = mean.isel(sel).transpose(grid[0]).values
        err = None if se is None else se.isel({k: v for k, v in sel.items() if k in se.dims})
        if err is not None:
            err = err.isel(time=-1) if "time" in err.dims else err
            err = err.transpose(grid[0]).values if grid[0] in err.dims else err.values
        ax.errorbar(x, y, yerr=err, marker="o", ms=3, capsize=2, label=_line_label(mean, sel) or None)
    label_axes(ax, title=name + note, xlabel=axis_label(ds[grid[0]], grid[0]), ylabel=axis_label(ds[name]))
    if others:
        ax.legend(fontsize=7)
