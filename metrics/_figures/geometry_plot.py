"""The figure of a :func:`metrics.head_geometry` Dataset: its variables per layer, one panel each.

A head geometry has no time axis: its variables run over layers, and within a layer over heads,
head pairs or principal angles. Each panel is a box per layer of a variable's values within that
layer (median, quartiles, whiskers to 1.5 IQR, outliers as dots), so 12 heads or 66 pairs x 32
angles read alike; a dotted line marks the value a variable takes under the paper's hypotheses.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from particles import validation as pv
from particles.validation import NONE, AnyOf, Instance, InvalidParameterError, declare

from .labels import axis_label, label_axes
from .plotting import _dataset, panel_axes

__all__ = ["plot_head_geometry", "GEOMETRY_PANELS"]

#: variables plot_head_geometry draws by default, with the value of each under the paper's hypotheses
#: (orthogonal score subspaces; Condition 3: symmetric M_h; Condition 4: W_h a positive multiple of M_h;
#: Theorems 39-40: self couplings dominating the cross couplings, ratio < 1)
GEOMETRY_PANELS = {"score_angle": 90.0, "symmetry_defect": 0.0, "value_alignment_cosine": 1.0,
                   "self_energy_ratio": 1.0}


def _panel(ds: xr.Dataset, name) -> xr.DataArray:
    if isinstance(name, str) and name in ds.data_vars and ds[name].dims[:1] == ("layer",) \
            and np.issubdtype(ds[name].dtype, np.number):
        return ds[name]
    have = sorted(v for v, da in ds.data_vars.items() if da.dims[:1] == ("layer",) and np.issubdtype(da.dtype,
                                                                                                     np.number))
    raise InvalidParameterError(f"The 'names' parameter of plot_head_geometry lists {name!r}, which is not a numeric "
                                f"variable of the Dataset over layers ({have}).")


@declare(ds=_dataset(("layer", "head"), "metrics.head_geometry"),
         names=AnyOf(NONE, pv.SequenceOf(Instance(str, test=lambda n: bool(n.strip()), what="a non-empty name"),
                                         hint="Pass a list of at least one variable name, or None.")),
         axes=AnyOf(NONE, Instance(object, test=lambda a: all(hasattr(x, "plot") for x in np.ravel(np.asarray(
             a, dtype=object))), what="a sequence of matplotlib Axes", bad=(3, "axes", [1, 2]))))
def plot_head_geometry(ds: xr.Dataset, names=None, *, axes=None):
    """The geometry of trained heads per layer: a box per layer of each variable's values over its
    heads, pairs or angles (:data:`GEOMETRY_PANELS` by default, each with its hypothesis' value dotted).

    Parameters
    ----------
    ds : Dataset from :func:`metrics.head_geometry`
    names : list of str, optional
        Numeric variables over ``layer`` (default: those of :data:`GEOMETRY_PANELS`).
    axes : sequence of matplotlib Axes, optional
        One per name (a new row of panels otherwise).

    Returns
    -------
    numpy array of matplotlib Axes
    """
    names = [v for v in GEOMETRY_PANELS if v in ds.data_vars] if names is None else list(names)
    panels = [_panel(ds, name) for name in names]  # all checked before anything is drawn
    if not panels:
        raise InvalidParameterError(f"plot_head_geometry found none of {list(GEOMETRY_PANELS)} in the Dataset: name "
                                    f"its variables over layers with names=[...] (it has {sorted(ds.data_vars)}).")
    axes = panel_axes(axes, names, "plot_head_geometry")
    layers = ds["layer"].values
    for ax, da in zip(axes, panels):
        values = [v[np.isfinite(v)] for v in (np.ravel(da.isel(layer=i).values) for i in range(len(layers)))]
        ax.boxplot(values, positions=np.arange(len(layers)), widths=0.6)
        ax.set_xticks(np.arange(len(layers)), [str(v) for v in layers])
        if da.name in GEOMETRY_PANELS:
            ax.axhline(GEOMETRY_PANELS[da.name], color="gray", lw=0.8, ls=":")
        label_axes(ax, title=str(da.name), xlabel=axis_label(ds["layer"], "layer"), ylabel=axis_label(da))
    return axes
