r"""Reading a limit study: the rate table and the log-log figure.

Both take the Dataset of :func:`metrics.mean_field_limit_study` and show, for each n, the seed
mean of a gap :math:`\bar g_n` with its standard error :math:`s_n/\sqrt S` (the ``{var}_stderr``
data variable), and the fitted exponent r of :math:`\bar g \sim n^r` with its interval
(``rate_{var}``, ``rate_{var}_ci``, :func:`metrics.fit_rate`).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from particles.validation import NONE, AnyOf, Boolean, Instance, Interval, InvalidParameterError, SequenceOf, declare

from .._data.dataset import time_index
from .plotting import axis_label, label_axes, noise_label

__all__ = ["limit_study_frame", "limit_study_table", "plot_limit_study", "study_rate_variables"]


def study_rate_variables(ds: xr.Dataset) -> list[str]:
    """Names of the gaps with a fitted rate in a limit-study Dataset (``w1``, ``sw2``, ...).

    >>> import xarray as xr
    >>> study_rate_variables(xr.Dataset({"w1": 0.0, "rate_w1": 0.0, "rate_w1_ci": 0.0}))
    ['w1']
    """
    if not isinstance(ds, xr.Dataset):
        raise InvalidParameterError(f"ds must be an xarray.Dataset from metrics.mean_field_limit_study; "
                                    f"got {type(ds).__name__}.")
    names = [v[len("rate_"):] for v in ds.data_vars
             if v.startswith("rate_") and not v.endswith(("_ci", "_stderr")) and v[len("rate_"):] in ds]
    if not names:
        raise InvalidParameterError(
            "ds has no fitted rates (rate_<var> data variables): it is not a limit-study Dataset. Make one with "
            f"metrics.mean_field_limit_study; its variables are {sorted(ds.data_vars)}.")
    return names


def _check_var(ds, var, names):
    if not isinstance(var, str) or var not in names:
        raise InvalidParameterError(f"var must be one of the study's rated gaps {names}; got {var!r}.")


def _time_index(ds, time) -> int:
    return time_index(ds, time, "time")


def _summary(ds: xr.Dataset, v: str, k: int):
    """Seed means and standard errors of gap ``v`` per n at save index k, its fitted rate and interval."""
    g = ds[v].isel(time=k)
    mean = g.mean("seed").values
    se = (ds[f"{v}_stderr"].isel(time=k).values if f"{v}_stderr" in ds
          else g.std("seed", ddof=1).values / np.sqrt(g.sizes["seed"]))
    lo, hi = np.asarray(ds[f"rate_{v}_ci"].isel(time=k).values, dtype=float)
    return mean, se, float(ds[f"rate_{v}"].isel(time=k)), lo, hi


def _mean_interval(ds: xr.Dataset, v: str, k: int, mean, se, level: float = 0.95):
    """Per n, the t interval of the seed mean: mean ± t_{(1+level)/2, s-1} se over its s seeds (NaN if s < 2)."""
    from scipy import stats

    s = ds[v].isel(time=k).count("seed").values.astype(float)
    with np.errstate(invalid="ignore"):
        half = np.where(s > 1, stats.t.ppf((1 + level) / 2, np.maximum(s - 1, 1)) * se, np.nan)
    return mean - half, mean + half


def _variables(ds: xr.Dataset, variables, caller: str) -> list:
    names = study_rate_variables(ds)
    variables = names if variables is None else list(variables)
    for v in variables:
        _check_var(ds, v, names)
    return variables


_STUDY = Instance(xr.Dataset, what="an xarray.Dataset from metrics.mean_field_limit_study")
_GAPS = AnyOf(NONE, SequenceOf(Instance(str, what="a gap name"), hint="Pass a list of the study's rated gaps, "
                                                                     "e.g. ['w1']."))


@declare(ds=_STUDY, time=Interval(), variables=_GAPS)
def limit_study_frame(ds: xr.Dataset, *, time: float = 0.0, variables=None):
    r"""A limit study at one save time as a pandas DataFrame: rows n (then ``"rate"``), columns
    (gap, statistic).

    For each rated gap, the row of each n holds the seed mean (``value``), its standard error
    (``stderr``) and its 95% t interval over the s seeds run at that n (``ci_low``, ``ci_high``:
    :math:`\bar g \pm t_{0.975,\,s-1}\,\mathrm{se}`, NaN only with a single seed); the last row,
    ``"rate"``, holds the fitted exponent r of :math:`\bar g\sim n^r` (``value``), its standard error
    when the study recorded it, and its interval (``ci_low``, ``ci_high``, as ``rate_<g>_ci``).
    ``frame.attrs["time"]`` is the save time.
    :func:`limit_study_table` prints the same numbers as text.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> n = np.array([100, 400])
    >>> g = np.array([[[0.10], [0.12]], [[0.05], [0.06]]])  # (n, seed, time)
    >>> ds = xr.Dataset({"w1": (("n_particles", "seed", "time"), g),
    ...                  "w1_stderr": (("n_particles", "time"), [[0.01], [0.005]]),
    ...                  "rate_w1": (("time",), [-0.5]), "rate_w1_ci": (("time", "bound"), [[-0.6, -0.4]])},
    ...                 coords={"n_particles": n, "time": [0.0]})
    >>> frame = limit_study_frame(ds)
    >>> float(frame.loc[400, ("w1", "value")]), float(frame.loc["rate", ("w1", "ci_low")])
    (0.055, -0.6)
    >>> round(float(frame.loc[400, ("w1", "ci_high")]), 4)  # 0.055 + t_{0.975, 1} 0.005
    0.1185
    """
    import pandas as pd

    variables = _variables(ds, variables, "limit_study_frame")
    k = _time_index(ds, time)
    index = pd.Index([int(n) for n in ds.n_particles.values] + ["rate"], name="n", dtype=object)
    columns = pd.MultiIndex.from_product([variables, ["value", "stderr", "ci_low", "ci_high"]],
                                         names=["gap", "statistic"])
    frame = pd.DataFrame(np.nan, index=index, columns=columns)
    for v in variables:
        mean, se, r, lo, hi = _summary(ds, v, k)
        r_se = float(ds[f"rate_{v}_stderr"].isel(time=k)) if f"rate_{v}_stderr" in ds else np.nan
        m_lo, m_hi = _mean_interval(ds, v, k, mean, se)
        frame[(v, "value")] = [*mean, r]
        frame[(v, "stderr")] = [*se, r_se]
        frame[(v, "ci_low")] = [*m_lo, lo]
        frame[(v, "ci_high")] = [*m_hi, hi]
    frame.attrs["time"] = float(ds.time[k])
    return frame


@declare(ds=_STUDY, time=Interval(), variables=_GAPS)
def limit_study_table(ds: xr.Dataset, *, time: float = 0.0, variables=None) -> str:
    r"""A plain-text table of a limit study at one save time: per n, the seed mean ± standard
    error of each rated gap, and a last row with the fitted exponent and its interval (the
    numbers of :func:`limit_study_frame`).

    Parameters
    ----------
    ds : Dataset of :func:`metrics.mean_field_limit_study`
    time : float
        A saved time (selected by value; a time outside the saved range is an error).
    variables : list of str, optional
        Gaps to show (default: every gap with a fitted rate).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> n = np.array([100, 400])
    >>> g = np.array([[[0.10], [0.12]], [[0.05], [0.06]]])  # (n, seed, time)
    >>> ds = xr.Dataset({"w1": (("n_particles", "seed", "time"), g),
    ...                  "w1_stderr": (("n_particles", "time"), [[0.01], [0.005]]),
    ...                  "rate_w1": (("time",), [-0.5]), "rate_w1_ci": (("time", "bound"), [[-0.6, -0.4]])},
    ...                 coords={"n_particles": n, "time": [0.0]})
    >>> print(limit_study_table(ds))
    t = 0
    n               w1
    100     0.11 ± 0.01
    400   0.055 ± 0.005
    rate  -0.500 [-0.600, -0.400]
    """
    frame = limit_study_frame(ds, time=time, variables=_variables(ds, variables, "limit_study_table"))
    cols = []
    for v in frame.columns.get_level_values("gap").unique():
        f = frame[v]
        cells = [f"{_num(m, '.4g')} ± {_num(s, '.2g')}" for m, s in zip(f["value"].iloc[:-1], f["stderr"].iloc[:-1])]
        r, lo, hi = f.loc["rate", ["value", "ci_low", "ci_high"]]
        cols.append((v, cells, f"{_num(r, '.3f')} " + ("[n/a]" if np.isnan(lo) or np.isnan(hi) else
                                                         f"[{lo:.3f}, {hi:.3f}]")))
    ns = [str(n) for n in frame.index[:-1]]
    w0 = max(len("rate"), *(len(n) for n in ns))
    widths = [max(len(name), len(rate), *(len(c) for c in cells)) for name, cells, rate in cols]
    lines = [f"t = {frame.attrs['time']:g}",
             f"{'n':<{w0}}  " + "  ".join(f"{name:>{w}}" for (name, _, _), w in zip(cols, widths))]
    for i, n in enumerate(ns):
        lines.append(f"{n:<{w0}}  " + "  ".join(f"{cells[i]:>{w}}" for (_, cells, _), w in zip(cols, widths)))
    lines.append(f"{'rate':<{w0}}  " + "  ".join(f"{rate:>{w}}" for (_, _, rate), w in zip(cols, widths)))
    if any("n/a" in line for line in lines):  # say why, rather than print nan
        lines.append(NOT_AVAILABLE)
    return "\n".join(line.rstrip() for line in lines)


#: the footnote of a table with numbers it cannot give (one seed: no spread to measure)
NOT_AVAILABLE = ("n/a: not available: an error bar needs at least 2 seeds at that n, and a rate interval at least 2 "
                 "seeds at every n (n_seeds >= 2); W2 beyond w2_max_n is not computed.")


def _num(x: float, fmt: str) -> str:
    return "n/a" if np.isnan(x) else format(x, fmt)


@declare(ds=_STUDY, var=AnyOf(NONE, Instance(str, what="a gap name")),
         ax=AnyOf(NONE, Instance(object, test=lambda a: hasattr(a, "errorbar"), what="a matplotlib Axes")),
         times=AnyOf(NONE, SequenceOf(Interval(), hint="Pass a list of saved times.")), guide=Boolean())
def plot_limit_study(ds: xr.Dataset, var: str | None = None, *, ax=None, times=None, guide: bool = True):
    r"""Log-log panel of a limit study: :math:`\bar g_n` against n with standard-error bars for
    each save time, the fitted slope and its interval in the legend, the :math:`n^{-1/2}` guide
    through the first point at t = 0, and the study's parameters in the title.

    Parameters
    ----------
    ds : Dataset of :func:`metrics.mean_field_limit_study`
    var : str, optional
        A rated gap (``"w1"``, ``"w2"``, ``"sw2"``, ``"energy_gap"``, ``"entropy_gap"``); default
        the study's main distance (``ds.attrs["rate_metric"]``).
    ax : matplotlib Axes, optional
        Drawn into (a new figure otherwise).
    times : list of float, optional
        Save times to draw, selected by value (default: all).
    guide : bool
        Draw the :math:`n^{-1/2}` reference line.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np, xarray as xr
    >>> n = np.array([100, 400])
    >>> g = np.array([[[0.10], [0.12]], [[0.05], [0.06]]])
    >>> ds = xr.Dataset({"w1": (("n_particles", "seed", "time"), g),
    ...                  "rate_w1": (("time",), [-0.5]), "rate_w1_ci": (("time", "bound"), [[-0.6, -0.4]])},
    ...                 coords={"n_particles": n, "time": [0.0]}, attrs={"rate_metric": "w1"})
    >>> ax = plot_limit_study(ds)
    >>> ax.get_xscale(), ax.get_yscale(), len(ax.lines) >= 2
    ('log', 'log', True)
    """
    names = study_rate_variables(ds)
    var = ds.attrs.get("rate_metric", names[0]) if var is None else var
    _check_var(ds, var, names)
    ks = range(ds.sizes["time"]) if times is None else [_time_index(ds, t) for t in times]
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(5.5, 4.2), layout="constrained")
    n = ds.n_particles.values.astype(float)
    for k in ks:
        mean, se, r, lo, hi = _summary(ds, var, k)
        ax.errorbar(n, mean, yerr=se, fmt="o-", capsize=3,
                    label=f"t = {float(ds.time[k]):g}: slope {r:.2f} [{lo:.2f}, {hi:.2f}]")
    if guide:
        g0 = float(ds[var].isel(time=0).mean("seed")[0])
        ax.plot(n, g0 * (n / n[0]) ** -0.5, "k--", label=r"$n^{-1/2}$")
    ax.set_xscale("log")
    ax.set_yscale("log")
    if n.size <= 8:  # the sizes studied as the ticks, in plain numbers (not 6 x 10^1 between them)
        from matplotlib.ticker import NullFormatter

        ax.set_xticks(n, [str(int(v)) if v < 1e5 else f"{v:.0e}" for v in n])
        ax.xaxis.set_minor_formatter(NullFormatter())
    long = ds[var].attrs.get("long_name", var)
    label_axes(ax, xlabel="n (tokens)", ylabel=axis_label(ds[var]))
    a = ds.attrs
    sphere = f"on $S^{{{int(a['d']) - 1}}}$" if "d" in a else ""
    params = [f"{k} = {a[k]}" if k != "kappa" else noise_label(a[k]) for k in ("kind", "beta", "kappa", "sampling")
              if k in a]
    if "n_heads" in a:
        params.insert(1, f"H = {a['n_heads']}")
    params.append(f"{ds.sizes.get('seed', 1)} seeds")
    label_axes(ax, title=" ".join(x for x in (long, sphere) if x) + "\n" + ", ".join(params), title_size=8)
    ax.legend(fontsize=7)
    return ax
