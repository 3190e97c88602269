r"""Rates :math:`g(n) \sim n^{r}`: the slope of log-gaps against log n, with calibrated intervals.

The one rate fit of the library (the limit study and the chaos-horizon study use it): a
least-squares slope over the n values of the seed means, with a delta-method t interval (default:
95 % intervals cover a known exponent in 95 % of synthetic studies) or a percentile bootstrap over
seeds, independent per n or paired over whole seeds.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from particles.validation import InvalidParameterError

__all__ = ["RateFit", "fit_rate"]


class RateFit(NamedTuple):
    """A fitted exponent r in :math:`g \\sim n^r` with its interval (see :func:`fit_rate`)."""

    rate: float
    lo: float
    hi: float
    stderr: float
    dof: float


_NAN_FIT = RateFit(float("nan"), float("nan"), float("nan"), float("nan"), float("nan"))


def fit_rate(n_values, gaps, *, paired: bool = False, level: float = 0.95, interval: str = "t",
             n_boot: int = 2000, rng=0) -> RateFit:
    r"""Exponent r of :math:`\bar g(n) \sim n^r` from seed-averaged gaps, with a ``level`` interval.

    The point estimate is the least-squares slope of :math:`y_n = \log \bar g_n` against
    :math:`x_n = \log n`: :math:`\hat r = \sum_n c_n y_n`, :math:`c_n = (x_n - \bar x) /
    \sum_m (x_m - \bar x)^2`, :math:`\bar g_n` the mean of the S seeds of n.

    ``interval="t"`` (default): the delta method, :math:`\log \bar g_n \approx \log E g_n +
    (\bar g_n - E g_n)/E g_n`, makes :math:`\hat r` a mean over seeds, and

    - ``paired=False`` (independent samples for every (n, seed)):
      :math:`\widehat{\mathrm{Var}}\,\hat r = \sum_n c_n^2 s_n^2 / S`, :math:`s_n^2` the
      sample variance of :math:`g_{n,s}/\bar g_n` over seeds, with Welch–Satterthwaite degrees of
      freedom :math:`\nu = (\sum_n a_n)^2 / \sum_n a_n^2/(S-1)`, :math:`a_n = c_n^2 s_n^2/S`;
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

    from particles.validation import check_bool, check_choice, check_param

    caller = "fit_rate"
    paired = check_bool(paired, "paired", caller)
    level = check_param(level, "level", caller, low=0.0, high=1.0, low_open=True, high_open=True)
    check_choice(interval, "interval", ("t", "bootstrap"), caller)
    from particles.validation import check_real_array, check_rng

    nv = check_real_array(n_values, "n_values", caller, ndim=1, min_size=2)
    if np.any(nv <= 0) or np.any(np.diff(nv) <= 0):
        raise InvalidParameterError(f"n_values of {caller} must be strictly increasing positive numbers; got {nv}.")
    logn = np.log(nv)
    g = check_real_array(gaps, "gaps", caller, shape=(len(nv), None), finite=False)
    n_boot = check_param(n_boot, "n_boot", caller, low=1, integer=True)
    rng = check_rng(rng, "rng", caller)
    if not np.all(np.isfinite(g)):
        return _NAN_FIT
    gbar = g.mean(axis=1)
    if not np.all(gbar > 0):
        return _NAN_FIT
    xc = logn - logn.mean()
    c = xc / (xc @ xc)
    slope = float(c @ np.log(gbar))
    S = g.shape[1]
    if S < 2:
        return RateFit(slope, float("nan"), float("nan"), float("nan"), float("nan"))
    if interval == "bootstrap":
        shape = (int(n_boot), 1, S) if paired else (int(n_boot), g.shape[0], S)
        idx = np.broadcast_to(rng.integers(0, S, size=shape), (int(n_boot), g.shape[0], S))
        boot = np.take_along_axis(g[None], idx, axis=2).mean(axis=2)  # (B, N)
        with np.errstate(divide="ignore"):
            y = np.log(boot)
        ok = np.all(np.isfinite(y), axis=1)
        slopes = y[ok] @ c
        a = (1 - level) / 2
        lo, hi = np.quantile(slopes, [a, 1 - a])
        return RateFit(slope, float(lo), float(hi), float(slopes.std(ddof=1)), float("nan"))
    z = g / gbar[:, None]  # relative deviations: the delta method's linear term
    if paired:
        w = c @ z  # (S,) one slope contribution per seed
        var, dof = w.var(ddof=1) / S, S - 1.0
    else:
        a_n = c**2 * z.var(axis=1, ddof=1) / S
        var = a_n.sum()
        dof = var**2 / np.sum(a_n**2 / (S - 1)) if var > 0 else float(S - 1)
    se = float(np.sqrt(var))
    half = float(stats.t.ppf(0.5 + level / 2, dof)) * se
    return RateFit(slope, slope - half, slope + half, se, float(dof))
