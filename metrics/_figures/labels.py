"""Labels of figures: axis labels from CF attrs, and titles and labels broken into lines that fit
the figure (so that nothing is clipped at any figure size under constrained layout)."""

from __future__ import annotations

import xarray as xr

__all__ = ["axis_label", "short_label", "fit_text", "label_axes", "DIMENSIONLESS"]

#: units that mean "dimensionless": not printed in labels
DIMENSIONLESS = ("1", "", "none", "dimensionless")
def axis_label(da, default: str = "") -> str:
    """``"long_name [units]"`` from a DataArray's (or an attrs dict's) attrs; dimensionless units
    (``"1"``) are left out.

    >>> import xarray as xr
    >>> axis_label(xr.DataArray([1.0], attrs={"long_name": "inverse temperature", "units": "1"}))
    'inverse temperature'
    >>> axis_label({"long_name": "W1 distance", "units": "rad"})
    'W1 distance [rad]'
    """
    attrs = da if isinstance(da, dict) else da.attrs
    name = attrs.get("long_name") or (None if isinstance(da, dict) else da.name) or default
    units = attrs.get("units")
    return str(name) if units is None or str(units).strip() in DIMENSIONLESS else f"{name} [{units}]"


def _span(ax) -> tuple[float, float]:
    """Width and height in points of the figure's share of ``ax`` (its grid cell, or the whole figure)."""
    w, h = (v * 72.0 for v in ax.figure.get_size_inches())
    spec = ax.get_subplotspec() if hasattr(ax, "get_subplotspec") else None
    if spec is None:
        return w, h
    rows, cols = spec.get_gridspec().get_geometry()
    return w * len(spec.colspan) / cols, h * len(spec.rowspan) / rows


def fit_text(text: str, width: float, size: float) -> str:
    """``text`` with its lines broken at spaces so that each fits ``width`` points at ``size`` points
    (a line of math text, ``$...$``, is never broken inside)."""
    import textwrap

    chars = max(10, int(width / (0.62 * size)))
    return "\n".join(textwrap.fill(line, chars, break_long_words=False, break_on_hyphens=False) or line
                     for line in str(text).split("\n"))


def label_axes(ax, *, title=None, xlabel=None, ylabel=None, title_size: float = 9.0) -> None:
    """Set the title and axis labels, each broken into lines that fit the axes' share of the figure
    (with constrained layout, nothing of them is clipped at any figure size)."""
    width, height = _span(ax)
    from matplotlib import rcParams

    label_size = float(rcParams["axes.labelsize"]) if isinstance(rcParams["axes.labelsize"], (int, float)) else 10.0
    if title is not None:
        # centred over the axes, which the y label pushes right: 0.75 of the figure's share
        ax.set_title(fit_text(title, 0.75 * width, title_size), fontsize=title_size)
    if xlabel is not None:
        ax.set_xlabel(fit_text(xlabel, 0.8 * width, label_size))
    if ylabel is not None:
        ax.set_ylabel(fit_text(ylabel, 0.75 * height, label_size))


def short_label(da: xr.DataArray) -> str:
    """``"name [units]"`` (a variable's name, its units unless dimensionless), for crowded axes."""
    return axis_label({"long_name": da.name, "units": da.attrs.get("units")})
