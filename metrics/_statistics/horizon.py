r"""How long the mean field holds: linearised fluctuation growth around the uniform state.

Tokens :math:`x_1, \dots, x_n` i.i.d. uniform on :math:`S^{d-1}` (d = 2, 3), empirical measure
:math:`\mu_n`, uniform measure σ (a stationary solution of the mean-field equation). Let
:math:`\{Y_{lm}\}_{m}` be a real orthonormal basis of the degree-l harmonics in :math:`L^2(\sigma)`
(:math:`k_l` of them: :math:`k_l = 2` on :math:`S^1` for l ≥ 1, :math:`k_l = 2l + 1` on :math:`S^2`).
The **degree amplitude** of a measure is

.. math:: A_l(\mu) = \Big(\sum_m \Big(\int Y_{lm}\,d\mu\Big)^2\Big)^{1/2},

so that :math:`\|\rho - 1\|_{L^2(\sigma)}^2 = \sum_{l\ge1} A_l^2` for a density ρ (Parseval). On
:math:`S^1`, :math:`Y = \sqrt2\cos l\theta, \sqrt2\sin l\theta` and :math:`A_l = \sqrt2\,|a_l|` with
the Fourier coefficient :math:`a_l = \frac1n\sum_j e^{il\theta_j}`.

**Initial law.** :math:`\int Y_{lm}\,d\mu_n` is a mean of n i.i.d. variables of mean 0 and
variance 1, uncorrelated across m; by the central limit theorem :math:`\sqrt n A_l(\mu_n(0)) \to
\chi_{k_l}` (a Rayleigh law on :math:`S^1`, :math:`\sqrt n |a_l| \to` Rayleigh of scale
:math:`1/\sqrt2`).

**Linear growth.** Linearising :math:`\partial_t\rho + \operatorname{div}(\rho v[\rho]) =
\kappa^{-1}\Delta\rho` at ρ = 1 (``meanfield.stability``), every coefficient
:math:`\int Y_{lm}\,d\mu` is multiplied by :math:`e^{\sigma_l t}`: σ_l of
:func:`meanfield.growth_rates` is the rate of the density's coefficients, hence of
:math:`A_l`, which is linear in the measure (amplitude and density conventions agree). A
finite-n flow is the mean-field flow evaluated on :math:`\mu_n`, so while the fluctuation is small

.. math:: A_l(t) \approx A_l(0)\,e^{\sigma_l t}.

**Breakdown time.** With :math:`l^* = \arg\max_l \sigma_l`, :math:`\sigma^* = \sigma_{l^*} > 0` and a
threshold δ on :math:`A_{l^*}`, the linearised flow crosses δ at

.. math:: t_\delta = \frac{\log\delta - \log A_{l^*}(0)}{\sigma^*}
   = \frac{\log\delta + \tfrac12\log n - \log\big(\sqrt n A_{l^*}(0)\big)}{\sigma^*}.

**Its law.** With :math:`R = \sqrt n A_{l^*}(0) \to \chi_k`, :math:`k = k_{l^*}`,

.. math:: Z = \sigma^* t_\delta - \tfrac12\log n - \log\delta = -\log R,\qquad
   P(Z \le z) = P(\chi_k \ge e^{-z}),\qquad E[Z] = -\tfrac12\big(\psi(k/2) + \log 2\big).

On :math:`S^1` (k = 2), :math:`R^2/2 \sim \mathrm{Exp}(1)` and Z + ½ log 2 is Gumbel with scale
½: :math:`E[Z] = (\gamma - \log 2)/2`. Hence :math:`E[t_\delta] = (\tfrac12\log n + \log\delta +
c_k)/\sigma^*` with :math:`c_k = E[Z]`: the horizon grows like :math:`\log n/(2\sigma^*)`, the constant
depends on the threshold, on the observable and on the multiplicity :math:`k_{l^*}`, and a run's
:math:`t_\delta` spreads by :math:`O(1/\sigma^*)` around it (``std Z = π/√24`` on S^1).

References
----------
Geshkovski, Letrouit, Polyanskiy, Rigollet, *A mathematical perspective on Transformers*,
arXiv:2312.10794. Bruno, Pasqualotto, Agazzi, on the emergence of clusters from the most unstable
mode of the uniform state in mean-field Transformers.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import stats
from scipy.special import digamma

from particles.validation import (
    AnyOf,
    Array,
    Instance,
    Integer,
    Interval,
    InvalidParameterError,
    check_real_array,
    declare,
    keyword_only,
)

__all__ = ["breakdown_time", "predicted_breakdown_time", "breakdown_law_cdf", "breakdown_law_mean",
           "fit_horizon_slope", "ResolutionWarning"]


class ResolutionWarning(UserWarning):
    """The time grid is too coarse to resolve a crossing (raise n_saves)."""


def _check_delta(delta, caller):
    fix = ("Use e.g. delta=0.1 (a breakdown is a distance or amplitude reaching delta).")
    if delta is None or isinstance(delta, (str, bytes, dict, set)):
        raise InvalidParameterError(f"The 'delta' parameter of {caller} must be a positive finite threshold (or a "
                                    f"1-D sequence of them); got {type(delta).__name__}. {fix}")
    delta = np.atleast_1d(check_real_array(delta, "delta", caller, ndim=(0, 1), finite=False, min_size=0,
                                           expected="a positive threshold or a 1-D sequence of them"))
    if delta.size == 0 or not np.all(np.isfinite(delta)) or np.any(delta <= 0):
        raise InvalidParameterError(
            f"The 'delta' parameter of {caller} must be a positive finite threshold (or a 1-D sequence of them); "
            f"got {delta.tolist()!r}. Use e.g. delta=0.1 (a breakdown is a distance or amplitude reaching delta).")
    return delta


def largest_breakdown_value(d: int, l_star: int, uniform: bool) -> tuple[float, str]:
    """The largest value a breakdown quantity can take, and why (a delta at or above it is never
    reached): A_l <= sqrt(2) on S^1 and sqrt(2 l + 1) on S^2 (all tokens at one point) from the
    uniform start; from a density, the distance to mu(t) is at most the diameter (W1 <= pi on S^1,
    sliced SW_2 <= 2 on S^2)."""
    if uniform:
        return (np.sqrt(2.0), "A_l <= sqrt(2) on S^1") if d == 2 else \
            (np.sqrt(2.0 * l_star + 1), f"A_{l_star} <= sqrt(2 l* + 1) = {np.sqrt(2.0 * l_star + 1):.4g} on S^2")
    return (np.pi, "W1 <= pi on S^1") if d == 2 else (2.0, "sliced SW_2 <= 2 on S^2")


@declare(max_log_step=Interval(0, None, closed="neither"))
def breakdown_time(t, values, delta, *, max_log_step: float = 0.25) -> np.ndarray:
    r"""First time a non-negative curve reaches δ: :math:`t_\delta = \inf\{t : g(t) \ge \delta\}`.

    Between the two save times that bracket the crossing, log g is interpolated linearly (exact
    for an exponential :math:`g = g_0 e^{\sigma t}`). Returns ``inf`` where the curve stays below δ
    up to the last time (the run did not break down within the horizon) and 0 where it starts at or
    above δ.

    Parameters
    ----------
    t : ndarray of shape (T,), strictly increasing
    values : ndarray of shape (..., T), finite, >= 0
    delta : float > 0 or 1-D sequence of them
    max_log_step : float
        Largest :math:`|\log g(t_{k+1}) - \log g(t_k)|` over a bracketing interval that still
        counts as resolved; beyond it a :class:`ResolutionWarning` says how much to refine.

    Returns
    -------
    ndarray of shape (len(delta), ...) (the δ axis is dropped for a scalar δ)

    Examples
    --------
    >>> t = np.linspace(0, 10, 101)
    >>> float(np.round(breakdown_time(t, 1e-3 * np.exp(0.5 * t), 0.1), 12)) == float(np.round(2 * np.log(100), 12))
    True
    """
    caller = "breakdown_time"
    scalar = np.ndim(delta) == 0
    deltas = _check_delta(delta, caller)
    t = check_real_array(t, "t", caller, ndim=1, expected="a strictly increasing 1-D array of times")
    g = check_real_array(values, "values", caller, finite=False, expected="an array of curve values (..., T)")
    if t.ndim != 1 or len(t) < 2 or not np.all(np.diff(t) > 0):
        raise InvalidParameterError(f"t of {caller} must be a strictly increasing 1-D array of >= 2 times; "
                                    f"got shape {t.shape}.")
    if g.shape[-1:] != t.shape or not np.all(np.isfinite(g)) or np.any(g < 0):
        raise InvalidParameterError(
            f"values of {caller} must be finite, non-negative, with last axis of length len(t) = {len(t)}; "
            f"got shape {g.shape}.")
    out = np.full((len(deltas),) + g.shape[:-1], np.inf)
    coarse = 0.0
    for i, dl in enumerate(deltas):
        above = g >= dl
        hit = above.any(axis=-1)
        k = np.argmax(above, axis=-1)
        for idx in zip(*np.nonzero(hit)) if g.ndim > 1 else ([()] if hit else []):
            kk = int(k[idx])
            if kk == 0:
                out[(i,) + tuple(idx)] = t[0]
                continue
            g0, g1 = g[idx][kk - 1], g[idx][kk]
            if g0 > 0:
                step = np.log(g1 / g0)
                coarse = max(coarse, step)
                out[(i,) + tuple(idx)] = t[kk - 1] + (t[kk] - t[kk - 1]) * np.log(dl / g0) / step
            else:
                out[(i,) + tuple(idx)] = t[kk]
                coarse = np.inf
    if coarse > max_log_step:
        warnings.warn(
            f"{caller}: the time grid is too coarse to resolve t_delta: log g jumps by {coarse:.3g} > "
            f"max_log_step={max_log_step} between two save times around a crossing. Use about "
            f"{int(np.ceil(min(coarse, 50) / max_log_step))}x more save times (n_saves).",
            ResolutionWarning, stacklevel=2)
    return out[0] if scalar else out


@declare(rate=Interval(0, None, closed="neither", hint="The growth rate sigma* of the unstable degree (> 0)."))
def predicted_breakdown_time(amplitude0, rate, delta):
    r"""Linearised breakdown time :math:`t_\delta = \log(\delta / A(0)) / \sigma` (module docstring).

    Parameters
    ----------
    amplitude0 : array_like, > 0
        Initial amplitude(s) :math:`A_{l^*}(0)` of the unstable mode, e.g. from :func:`metrics.harmonic_amplitudes`.
    rate : float > 0
        Growth rate σ* of that mode (:func:`meanfield.growth_rates`).
    delta : float > 0 or 1-D sequence of them (a leading δ axis is added)

    Examples
    --------
    >>> float(predicted_breakdown_time(0.01, 0.5, 0.1)) == float(2 * np.log(10))
    True
    """
    caller = "predicted_breakdown_time"
    scalar = np.ndim(delta) == 0
    a0 = check_real_array(amplitude0, "amplitude0", caller, finite=False, expected="positive initial amplitudes")
    deltas = _check_delta(delta, caller).reshape((-1,) + (1,) * a0.ndim)
    if not np.all(np.isfinite(a0)) or np.any(a0 <= 0):
        raise InvalidParameterError(f"amplitude0 of {caller} must be finite and > 0 (log of it is taken); "
                                    f"got min {float(np.min(a0)) if a0.size else 'empty'}.")
    out = np.log(deltas / a0) / rate
    return out[0] if scalar else out


@keyword_only("k")
@declare(z=Array(what="finite real values of Z"), k=Integer(1))
def breakdown_law_cdf(z, *, k: int = 2):
    r"""CDF of the limit law of :math:`Z = \sigma^* t_\delta - \tfrac12\log n - \log\delta = -\log\chi_k`:
    :math:`P(Z \le z) = P(\chi_k \ge e^{-z})` (module docstring; k = 2 on S^1, 2l*+1 on S^2).

    Examples
    --------
    >>> z = 0.3   # on S^1: P(R^2/2 >= e^{-2z}/2) = exp(-e^{-2z}/2)
    >>> bool(np.isclose(breakdown_law_cdf(z, k=2), np.exp(-np.exp(-2 * z) / 2)))
    True
    """
    return stats.chi(k).sf(np.exp(-z))


@declare(k=Integer(1))
def breakdown_law_mean(k: int = 2) -> float:
    r""":math:`E[Z] = -E[\log\chi_k] = -\tfrac12(\psi(k/2) + \log 2)`.

    Examples
    --------
    >>> bool(np.isclose(breakdown_law_mean(2), (np.euler_gamma - np.log(2)) / 2))
    True
    """
    return float(-0.5 * (digamma(k / 2) + np.log(2.0)))


@declare(n_boot=Integer(1), level=Interval(0, 1, closed="neither", hint="A probability, e.g. level=0.95."),
         rng=AnyOf(Integer(0), Instance(np.random.Generator), hint="Pass a seed or a numpy Generator."))
def fit_horizon_slope(n_values, t_delta, *, counts=None, n_boot: int = 1000, level: float = 0.95,
                      rng=0) -> tuple[float, float, float]:
    r"""Slope s of the seed-mean :math:`\bar t_\delta(n) = c + s\log n` and its bootstrap percentile
    interval, resampling the seeds of each n with replacement. Theory: :math:`s = 1/(2\sigma^*)`.

    With ``counts`` (seeds run at each n; ``t_delta[i, counts[i]:]`` is ignored, e.g. NaN padding)
    the seed means are weighted by their counts, :math:`\hat s = \sum_i c_i (x_i - \bar x)\bar t_i /
    \sum_i c_i (x_i - \bar x)^2`, :math:`\bar x = \sum_i c_i x_i / \sum_i c_i`, :math:`x = \log n`: the
    least-squares line through all runs, the minimum-variance fit when every run has the same spread
    (:math:`\mathrm{Var}\,\bar t_i = \sigma^2/c_i`). Equal counts give the plain fit over n. Runs with
    infinite :math:`t_\delta` (no breakdown) make the fit NaN.

    Examples
    --------
    >>> n = np.array([100, 1000, 10000])
    >>> s, lo, hi = fit_horizon_slope(n, np.log(n)[:, None] + np.zeros((3, 4)))
    >>> round(s, 12), round(lo, 12), round(hi, 12)
    (1.0, 1.0, 1.0)
    """
    caller = "fit_horizon_slope"
    nv = check_real_array(n_values, "n_values", caller, ndim=1, expected="a 1-D array of particle numbers")
    if np.any(nv <= 0):
        raise InvalidParameterError(f"n_values of {caller} must be positive; got {nv.tolist()}.")
    logn = np.log(nv)
    td = check_real_array(t_delta, "t_delta", caller, finite=False, expected="breakdown times (n, seed)")
    if td.ndim != 2 or td.shape[0] != len(logn) or len(logn) < 2:
        raise InvalidParameterError(f"t_delta of {caller} must have shape (len(n_values) >= 2, n_seeds); got shape "
                                    f"{td.shape} for {len(logn)} n values.")
    c = np.full(len(logn), td.shape[1]) if counts is None else np.asarray(counts)
    if (c.shape != logn.shape or not np.issubdtype(c.dtype, np.integer) or np.any(c < 1)
            or np.any(c > td.shape[1])):
        raise InvalidParameterError(f"counts of {caller} must be one integer in [1, {td.shape[1]}] per n value; "
                                    f"got {counts!r}.")
    runs = [td[i, :k] for i, k in enumerate(c)]
    if any(np.any(np.isnan(r)) for r in runs):
        raise InvalidParameterError(f"t_delta of {caller} has NaN among the runs it fits (a failed run): drop "
                                    "failed runs first, or pass counts for NaN padding.")
    if not all(np.all(np.isfinite(r)) for r in runs):
        return float("nan"), float("nan"), float("nan")
    w = c / c.sum()
    xc = logn - w @ logn

    def fit(means):  # (..., N) seed means -> slopes
        return means @ (w * xc) / (w @ xc**2)

    gen = np.random.default_rng(rng)
    boot = np.stack([r[gen.integers(0, len(r), size=(n_boot, len(r)))].mean(axis=1) for r in runs], axis=1)
    a = (1 - level) / 2
    lo, hi = np.quantile(fit(boot), [a, 1 - a])
    return float(fit(np.array([r.mean() for r in runs]))), float(lo), float(hi)
