r"""The chaos study's breakdown analysis: :math:`t_\delta` measured and predicted per run, the
dominant degree, :math:`Z`, the slope over n and the KS test of :math:`Z` (:func:`breakdown`).

A run that starts at or above δ (its :math:`A_{l^*}(0)`, or its distance to :math:`\mu(0)` from a
density, is already :math:`\ge\delta`: δ is below the initial fluctuation, about :math:`n^{-1/2}`)
has :math:`t_\delta = 0` by definition, but no breakdown to predict: the linearised time
:math:`\log(\delta/A(0))/\sigma^*` would be :math:`\le 0` and :math:`Z` would not follow its law. Such
runs are flagged (``started_above_delta``), their prediction and :math:`Z` are masked (NaN, left out
of the KS test), and a :class:`metrics.ResolutionWarning` names how many there are and what to change.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import stats

import meanfield as mf
from particles.validation import InvalidParameterError

from .._observables.harmonics import harmonic_multiplicity
from .._statistics.horizon import (
    ResolutionWarning,
    breakdown_law_cdf,
    breakdown_law_mean,
    breakdown_time,
    fit_horizon_slope,
    largest_breakdown_value,
    predicted_breakdown_time,
)

__all__ = ["breakdown", "breakdown_variables", "check_resolution", "first_index"]

#: largest |Δ log A_{l*}| per save interval (σ* Δt) that still resolves t_δ
MAX_LOG_STEP = 0.25

#: units of the study's times (t_delta, its prediction, the slope d t_delta / d log n) and, inverted, of its
#: rates: the time of the dynamics, which the time coordinate counts (dimensionless, so that coordinate says "1")
TIME_UNITS = "time"


def first_index(ts, t):
    """Index of the first save time >= t (the last one if t is beyond the horizon)."""
    return np.minimum(np.searchsorted(ts, t, side="left"), len(ts) - 1)


def _started_above(start, ok, deltas, n_values, caller="chaos_horizon_study") -> np.ndarray:
    """(D, N, S) flags of the runs whose breakdown quantity is >= delta at t = 0; warns when any is."""
    above = ok[None] & (start[None] >= np.asarray(deltas)[:, None, None])
    if above.any():
        per_delta = ", ".join(f"delta = {d:g}: {int(a.sum())}" for d, a in zip(deltas, above) if a.any())
        smallest = np.asarray(n_values)[above.any(axis=(0, 2))]
        warnings.warn(f"{caller}: {int(above.sum())} of {int(ok.sum()) * len(deltas)} (delta, n, seed) runs start at "
                      f"or above delta ({per_delta}; at n = {smallest.tolist()}): delta is below their initial "
                      "fluctuation (~ n^-1/2), so t_delta = 0 is not a breakdown. Their t_delta_predicted and "
                      "horizon_z are masked (NaN; started_above_delta = 1); raise delta or the smallest n.",
                      ResolutionWarning, stacklevel=5)
    return above


def _times(ts, a_star, dist, ok, s):
    """(t_delta, t_delta on the distance, prediction, stable) per (delta, n, seed)."""
    deltas, s_star = s.deltas, s.s_star
    td = np.full((len(deltas),) + a_star.shape[:-1], np.nan)  # failed runs (success = 0) keep NaN
    td_dist = np.full_like(td, np.nan)
    with warnings.catch_warnings():
        # the grid was checked against sigma*; a non-linear overshoot at late times is not a resolution issue
        warnings.simplefilter("ignore", ResolutionWarning)
        td[:, ok] = breakdown_time(ts, a_star[ok], deltas)
        td_dist[:, ok] = breakdown_time(ts, dist[ok], deltas)
    stable, theory = s_star <= 0, s.uniform
    pred = np.full_like(td, np.inf if stable else np.nan)
    if not stable and theory:
        pred[:, ok] = predicted_breakdown_time(a_star[ok][:, 0], s_star, deltas)
    if not theory:  # a perturbed start: breakdown is the distance to mu(t) reaching delta
        td = td_dist.copy()
    n_inf = int(np.sum(np.isinf(td)))
    if not stable and n_inf:
        horizon = np.where(np.isfinite(pred), pred, np.nan)
        hint = f" beyond about {float(np.nanmax(horizon)):.3g}" if np.isfinite(horizon).any() else ""
        warnings.warn(f"chaos_horizon_study: {n_inf} of {td.size} (delta, n, seed) runs did not reach delta by "
                      f"t1 = {s.t1} (t_delta = inf); raise t1{hint}.", ResolutionWarning, stacklevel=5)
    return td, td_dist, pred, stable


def breakdown(ts, amp, dist, s) -> dict:
    """t_delta measured (on A_{l*} and on the distance) and predicted, dominant degree, Z, slope, KS and the
    runs that started above delta (``s``: the study's settings, with its derived deltas, l_star, s_star,
    uniform and counts)."""
    deltas, l_star, s_star, n_values, theory = s.deltas, s.l_star, s.s_star, s.n_values, s.uniform
    a_star = amp[..., l_star - 1]
    ok = np.all(np.isfinite(a_star), axis=-1) & np.all(np.isfinite(dist), axis=-1)
    td, td_dist, pred, stable = _times(ts, a_star, dist, ok, s)
    above = _started_above((a_star if theory else dist)[..., 0], ok, deltas, n_values)
    pred[above] = np.nan
    k = harmonic_multiplicity(l_star, d=s.model.d)
    idx = first_index(ts, np.where(np.isfinite(td), td, ts[-1]))
    at = np.take_along_axis(amp[None], idx[..., None, None], axis=3)[..., 0, :]  # (D, N, S, L)
    dominant = (np.argmax(at, axis=-1) + 1).astype(float)
    dominant[~np.isfinite(td)] = 0.0  # 0: no breakdown within the horizon (or a failed run)
    dominant[np.isnan(amp[..., 0, 0])[None].repeat(len(deltas), 0)] = np.nan  # a seed not run at this n
    if not theory:  # A_l of mu_n includes mu(t)'s own harmonics: no dominant fluctuation mode to read off
        dominant[:] = np.nan
    z = s_star * td - 0.5 * np.log(np.asarray(n_values, float))[None, :, None] - np.log(deltas)[:, None, None]
    z = np.where(above, np.nan, z) if theory else np.full_like(z, np.nan)
    counts = np.asarray(s.counts)
    ran = np.arange(td.shape[-1]) < counts[:, None]  # (N, S): the seeds each n ran
    fits = np.array([fit_horizon_slope(n_values, td[i], counts=counts, n_boot=int(s.n_boot),
                                       rng=s.seed)
                     if not np.any(np.isnan(td[i][ran])) else (np.nan,) * 3 for i in range(len(deltas))])
    ks = np.array([stats.kstest(zi[np.isfinite(zi)], lambda q: breakdown_law_cdf(q, k=k)).pvalue
                   if (not stable and theory and np.sum(np.isfinite(zi)) >= 2) else np.nan for zi in z])
    return {"td": td, "td_dist": td_dist, "pred": pred, "dominant": dominant, "z": z, "fits": fits, "ks": ks,
            "k": k, "stable": stable, "above": above.astype(np.int8)}


def breakdown_variables(ts, amp, dist, s) -> dict:
    """The chaos study's data variables of the breakdown (:func:`breakdown`) and of the growth rates."""
    b = breakdown(ts, amp, dist, s)
    td, td_dist, pred, dominant, z, fits, ks, k, stable = (b[key] for key in ("td", "td_dist", "pred", "dominant", "z",
                                                                            "fits", "ks", "k", "stable"))
    l_star, s_star, run = s.l_star, s.s_star, ("delta", "n_particles", "seed")
    return {
        "growth_rate": (("degree",), np.asarray(s.sigma[1:], float),
                        {"long_name": "sigma_l of the uniform state (meanfield.growth_rates)",
                         "units": f"1/{TIME_UNITS}"}),
        "t_delta": (run, td, {"long_name": ("first time A_{l*}(t) >= delta" if s.uniform else
                                            "first time the distance to mu(t) >= delta")
                                           + " (inf: not by t1; NaN: failed run or seed not run)",
                              "units": TIME_UNITS}),
        "t_delta_predicted": (run, pred, {"long_name": "linearised t_delta = log(delta / A_{l*}(0)) / sigma* "
                                                       "(inf: stable; NaN: started above delta)", "units": TIME_UNITS}),
        "t_delta_distance": (run, td_dist, {"long_name": "first time the distance to the mean field >= delta "
                                                         "(inf: not by t1)", "units": TIME_UNITS}),
        "dominant_mode": (run, dominant, {"long_name": "degree with the largest A_l at the first save >= t_delta "
                                                       "(0: no breakdown)", "units": "1"}),
        "horizon_z": (run, z, {"long_name": "sigma* t_delta - log(n)/2 - log(delta) (NaN: started above delta)",
                               "units": "1"}),
        "started_above_delta": (run, b["above"], {"long_name": "1 if the run started at or above delta (its t_delta "
                                                               "= 0 is no breakdown: prediction and Z masked)",
                                                  "units": "1"}),
        "horizon_z_law_mean": ((), breakdown_law_mean(k) if not stable and s.uniform else np.nan,
                               {"long_name": f"E[Z] = -E[log chi_{k}] (NaN: stable, no breakdown law)", "units": "1"}),
        "law_ks_pvalue": (("delta",), ks, {"long_name": f"KS p-value of horizon_z (all runs) against -log chi_{k} "
                                                        "(NaN: stable)", "units": "1"}),
        "slope": (("delta",), fits[:, 0], {"long_name": "fitted d mean(t_delta) / d log n (NaN if a run did not "
                                                        "break down)", "units": TIME_UNITS}),
        "slope_ci": (("delta", "bound"), fits[:, 1:], {"long_name": "95% bootstrap interval (over seeds) of slope",
                                                       "units": TIME_UNITS}),
        "slope_predicted": ((), (1 / (2 * s_star) if not stable else np.inf) if s.uniform else np.nan,
                            {"long_name": "1 / (2 sigma*) (inf: stable)", "units": TIME_UNITS}),
        "l_star": ((), l_star, {"long_name": "most unstable degree argmax_l sigma_l", "units": "1"}),
        "sigma_star": ((), s_star, {"long_name": "sigma_{l*}", "units": f"1/{TIME_UNITS}"}),
    }


def check_resolution(s, caller: str) -> None:
    """What the declaration cannot check: l_max holds the most unstable degree, delta can be reached, and
    the save grid resolves the growth of A_{l*} (these depend on the growth rates)."""
    l_star = s.l_star
    # a degree above l_max could still be the most unstable one: check up to twice further
    wider = mf.growth_rates(s.model, l_max=2 * s.l_max + 2, kappa=s.kappa)
    if np.argmax(wider[1:]) + 1 != l_star:
        raise InvalidParameterError(
            f"The 'l_max' parameter of {caller} must include the most unstable degree l* = "
            f"{int(np.argmax(wider[1:]) + 1)}; got l_max = {s.l_max}.")
    top, why = largest_breakdown_value(s.model.d, l_star, s.uniform)
    if np.any(s.deltas >= top):
        raise InvalidParameterError(
            f"The 'delta' parameter of {caller} must be below {top:.4g}, the largest value the breakdown quantity "
            f"can take ({why}); got {s.deltas.tolist()}. A larger delta is never reached: lower it.")
    step = s.ts[1] - s.ts[0]
    if s.s_star > 0 and s.s_star * step > MAX_LOG_STEP:
        raise InvalidParameterError(
            f"The time grid of {caller} is too coarse to resolve t_delta: sigma* dt_save = "
            f"{s.s_star * step:.3g} > {MAX_LOG_STEP} (sigma* = {s.s_star:.4g}, t1 = {s.t1}, n_saves = "
            f"{s.n_saves}). Use n_saves >= {int(np.ceil(s.s_star * s.t1 / MAX_LOG_STEP)) + 1}.")
