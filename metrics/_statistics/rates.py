r"""Rates :math:`g(n) \sim n^{r}`: the slope of log-gaps against log n, with calibrated intervals.

The one rate fit of the library (the limit study and the chaos-horizon study use it): a
least-squares slope over the n values of the seed means, with a delta-method t interval (default:
95 % intervals cover a known exponent in 95 % of synthetic studies) or a percentile bootstrap over
seeds, independent per n or paired over whole seeds.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from particles.validation import Boolean, Integer, Interval, InvalidParameterError, Options, declare

__all__ = ["RateFit", "fit_rate", "rate_variables", "rate_interval_note"]


class RateFit(NamedTuple):
    """A fitted exponent r in :math:`g \\sim n^r` with its interval (see :func:`fit_rate`)."""

    rate: float
    lo: float
    hi: float
    stderr: float
    dof: float


_NAN_FIT = RateFit(float("nan"), float("nan"), float("nan"), float("nan"), float("nan"))


@declare(paired=Boolean(), level=Interval(0, 1, closed="neither", hint="A probability, e.g. level=0.95."),
         interval=Options("t", "bootstrap"), n_boot=Integer(1))
def fit_rate(n_values, gaps, *, paired: bool = False, level: float = 0.95, interval: str = "t",
             n_boot: int = 2000, rng=0, counts=None) -> RateFit:
    r"""Exponent r of :math:`\bar g(n) \sim n^r` from seed-averaged gaps, with a ``level`` interval.

    The point estimate is the least-squares slope of :math:`y_n = \log \bar g_n` against
    :math:`x_n = \log n`: :math:`\hat r = \sum_n c_n y_n`, :math:`c_n = (x_n - \bar x) /
    \sum_m (x_m - \bar x)^2`, :math:`\bar g_n` the mean of the S seeds of n.

    ``interval="t"`` (default): the delta method, :math:`\log \bar g_n \approx \log E g_n +
    (\bar g_n - E g_n)/E g_n`, makes :math:`\hat r` a mean over seeds, and

    - ``paired=False`` (independent samples for every (n, seed)):
      :math:`\widehat{\mathrm{Var}}\,\hat r = \sum_n c_n^2 s_n^2 / S_n`, :math:`s_n^2` the
      sample variance of :math:`g_{n,s}/\bar g_n` over the :math:`S_n` seeds of n, with
      Welch–Satterthwaite degrees of freedom :math:`\nu = (\sum_n a_n)^2 / \sum_n a_n^2/(S_n-1)`,
      :math:`a_n = c_n^2 s_n^2/S_n`, when every n has the same number of seeds; with unequal
      ``counts`` the relative spread is pooled over n (it is the same for every n in the
      :math:`n^{-1/2}` regime), :math:`s^2 = \sum_{n,s}(z_{n,s}-1)^2/\nu`, :math:`\nu = \sum_n (S_n-1)`
      (Welch with two seeds at some n under-covers: 87-90 % in the calibration test);
    - ``paired=True`` (nested samples: seed s of every n shares its draws, so errors are
      correlated across n): per-seed contributions :math:`w_s = \sum_n c_n g_{n,s}/\bar g_n`,
      :math:`\widehat{\mathrm{Var}}\,\hat r = s_w^2 / S`, :math:`\nu = S - 1`;

    and the interval is :math:`\hat r \pm t_{\nu,(1+\text{level})/2}\,\mathrm{se}`.
    ``interval="bootstrap"``: percentile interval over ``n_boot`` resamples of the seeds,
    independently for each n, or (``paired=True``) whole seeds jointly across n. With few seeds
    the percentile bootstrap is too narrow (its variance is (S-1)/S of the sample's and it uses
    normal rather than t quantiles); the t interval is the calibrated one (the test suite checks
    its coverage over synthetic studies with a known exponent).

    Parameters
    ----------
    n_values : (N,) increasing positive numbers, N >= 2
    gaps : (N, S) array
        :math:`g_{n,s}`; non-finite or non-positive seed means give a NaN fit.
    paired : bool
        Whether seed s of every n comes from the same draws (nested samples).
    level : float in (0, 1)
    interval : {"t", "bootstrap"}
    n_boot, rng : resamples and seed of ``interval="bootstrap"``
    counts : (N,) integers in [1, S], optional
        Seeds of each n (``gaps[n, counts[n]:]`` are ignored): more seeds where they are cheap
        (small n) narrow the interval at little cost. Independent samples only (not ``paired``).

    Returns
    -------
    RateFit
        ``(rate, lo, hi, stderr, dof)``; with one seed the interval, stderr and dof are NaN
        (``dof`` is NaN for the bootstrap).

    Examples
    --------
    >>> import numpy as np
    >>> n = np.array([100, 400, 1600])
    >>> g = 3.0 / np.sqrt(n)[:, None] * np.array([[0.9, 1.1, 1.0]] * 3)
    >>> fit = fit_rate(n, g)
    >>> round(fit.rate, 12), fit.lo < -0.5 < fit.hi
    (-0.5, True)
    """
    from scipy import stats

    caller = "fit_rate"
    from particles.validation import check_real_array, check_rng

    nv = check_real_array(n_values, "n_values", caller, ndim=1, min_size=2)
    if np.any(nv <= 0) or np.any(np.diff(nv) <= 0):
        raise InvalidParameterError(f"n_values of {caller} must be strictly increasing positive numbers; got {nv}.")
    logn = np.log(nv)
    g = check_real_array(gaps, "gaps", caller, shape=(len(nv), None), finite=False)
    rng = check_rng(rng, "rng", caller)
    counts = _check_counts(counts, g.shape, paired, caller)
    present = np.arange(g.shape[1])[None, :] < counts[:, None]
    if not np.all(np.isfinite(g[present])):
        return _NAN_FIT
    gbar = np.where(present, g, 0.0).sum(axis=1) / counts
    if not np.all(gbar > 0):
        return _NAN_FIT
    xc = logn - logn.mean()
    c = xc / (xc @ xc)
    slope = float(c @ np.log(gbar))
    if counts.min() < 2:
        return RateFit(slope, float("nan"), float("nan"), float("nan"), float("nan"))
    if interval == "bootstrap":
        return _bootstrap(g, counts, c, slope, paired, level, int(n_boot), rng)
    z = np.where(present, g / gbar[:, None], np.nan)  # relative deviations: the delta method's linear term
    S = g.shape[1]
    if paired:
        w = c @ z  # (S,) one slope contribution per seed
        var, dof = w.var(ddof=1) / S, S - 1.0
    elif np.all(counts == counts[0]):
        a_n = c**2 * np.nanvar(z, axis=1, ddof=1) / counts
        var = a_n.sum()
        dof = var**2 / np.sum(a_n**2 / (counts - 1)) if var > 0 else float(counts.min() - 1)
    else:
        # unequal seeds: Welch with 1-3 degrees of freedom at some n under-covers (87-90 % in the
        # calibration test); the relative spread of g/gbar is the same for every n in the n^{-1/2}
        # regime, so pool it over n
        dof = float(np.sum(counts - 1))
        var = float(np.sum(c**2 / counts) * np.nansum((z - 1.0) ** 2) / dof)
    se = float(np.sqrt(var))
    half = float(stats.t.ppf(0.5 + level / 2, dof)) * se
    return RateFit(slope, slope - half, slope + half, se, float(dof))


def _check_counts(counts, shape, paired, caller):
    N, S = shape
    if counts is None:
        return np.full(N, S)
    from particles.validation import check_real_array

    k = check_real_array(counts, "counts", caller, shape=(N,))
    if np.any(k != np.round(k)) or np.any(k < 1) or np.any(k > S):
        raise InvalidParameterError(f"counts of {caller} must be integers in [1, {S}] (seeds of each n); got {k}.")
    if paired and np.any(k != k[0]):
        raise InvalidParameterError(f"counts of {caller} must be equal for paired=True (seed s of every n shares its "
                                    f"draws); got {k.astype(int).tolist()}.")
    return k.astype(int)


def _bootstrap(g, counts, c, slope, paired, level, n_boot, rng) -> RateFit:
    """Percentile interval over resamples of the seeds (each n within its own seeds, or whole seeds)."""
    N = g.shape[0]
    if paired:
        idx = np.broadcast_to(rng.integers(0, counts[0], size=(n_boot, 1, counts[0])), (n_boot, N, counts[0]))
        boot = np.take_along_axis(g[None, :, :counts[0]], idx, axis=2).mean(axis=2)  # (B, N)
    else:
        boot = np.stack([g[n, rng.integers(0, counts[n], size=(n_boot, counts[n]))].mean(axis=1) for n in range(N)],
                        axis=1)
    with np.errstate(divide="ignore"):
        y = np.log(boot)
    ok = np.all(np.isfinite(y), axis=1)
    slopes = y[ok] @ c
    a = (1 - level) / 2
    lo, hi = np.quantile(slopes, [a, 1 - a])
    return RateFit(slope, float(lo), float(hi), float(slopes.std(ddof=1)), float("nan"))


def rate_variables(name: str, g: np.ndarray, n_values, counts, *, paired: bool, interval: str, n_boot: int, rng,
                   units: str = "1", partial: bool = False) -> dict:
    """The Dataset variables of one gap ``g`` (n, seed, time; NaN beyond the seeds of each n): the standard
    error of each n's seed mean (NaN with one seed) and, per time, the fitted rate (:func:`fit_rate`) with
    its interval and standard error. ``partial``: the gap is computed for some n only (``w2`` up to
    ``w2_max_n``): the fit is over the n whose runs all have it."""
    counts, n_values = np.asarray(counts), np.asarray(n_values)
    present = np.arange(g.shape[1])[None, :, None] < counts[:, None, None]
    mean = np.where(present, g, 0.0).sum(axis=1) / counts[:, None]
    dev = np.where(present, g - mean[:, None, :], 0.0)
    scale = np.max(np.abs(dev), axis=1, initial=0.0)  # (squares of gaps near 1e169, USA at large beta, overflow)
    with np.errstate(invalid="ignore", divide="ignore"):  # one seed: no spread, NaN
        ss = ((dev / np.where(scale > 0, scale, 1.0)[:, None, :]) ** 2).sum(axis=1)
        se = np.where(counts[:, None] > 1, scale * np.sqrt(ss / (counts[:, None] - 1) / counts[:, None]), np.nan)
    rows = np.array([not partial or np.all(np.isfinite(g[i, :c])) for i, c in enumerate(counts)])
    # (fewer than two n with every seed finite, e.g. every cell failed: no rate, NaN; the failures are named)
    fits = np.array([fit_rate(n_values[rows], g[rows][:, :, k], paired=paired, interval=interval, n_boot=n_boot,
                              rng=rng, counts=counts[rows])[:4] if rows.sum() >= 2 else [np.nan] * 4
                     for k in range(g.shape[2])])
    how = f"{'t' if interval == 't' else 'bootstrap'} interval of rate_{name} " \
          f"({'paired over seeds' if paired else 'independent n'})"
    # one seed has no spread: say so where it leaves NaN (the table prints n/a)
    one = (counts < 2).any()
    se_note = {"comment": "NaN where an n has one seed: a standard error needs at least 2"} if one else {}
    ci_note = {"comment": "NaN when an n has one seed: the interval needs the spread of 2 seeds or more"} if one else {}
    if one:
        warnings.warn(f"one seed at n = {n_values[counts < 2].tolist()}: the standard errors and the intervals of the "
                      "fitted rates are NaN (they need the spread of 2 seeds or more; the variables' comment attrs "
                      "say so); run n_seeds >= 2 for intervals", RuntimeWarning, stacklevel=3)
    return {f"{name}_stderr": (("n_particles", "time"), se, {"long_name": f"standard error of the seed mean of {name}",
                                                             "units": units, **se_note}),
            f"rate_{name}": (("time",), fits[:, 0], {"long_name": f"fitted exponent r in {name} ~ n^r", "units": "1"}),
            f"rate_{name}_ci": (("time", "bound"), fits[:, 1:3], {"long_name": f"95% {how}", "units": "1", **ci_note}),
            f"rate_{name}_stderr": (("time",), fits[:, 3], {"long_name": f"standard error of rate_{name}",
                                                            "units": "1", **ci_note})}


def rate_interval_note(interval: str, paired: bool) -> str:
    """How the rate intervals were made, in words (a study's ``rate_interval`` attr)."""
    return (("delta-method t interval (metrics.fit_rate)" if interval == "t" else
             "percentile bootstrap over seeds (metrics.fit_rate)")
            + (", paired: whole seeds across n" if paired else ", independent samples per n"))
