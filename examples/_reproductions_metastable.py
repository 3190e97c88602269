"""Rows of docs/reproductions.md measured with the code of the examples periodic_state,
metastable_staircase and meanfield_runs.

The most unstable mode of the uniform state (Bruno-Pasqualotto-Agazzi, arXiv:2410.23228), the energy
jumps of the metastable staircase (Geshkovski-Koubbi-Polyanskiy-Rigollet, arXiv:2410.06833), each
with an uncertainty and an alternative, and the noise threshold of the uniform state on S^1 (a
consistency check of meanfield.stability's closed form).
"""

from __future__ import annotations

import numpy as np

import meanfield as mf
from examples import metastable_staircase as ms
from examples import periodic_state as ps
from examples._reproductions_limits import extrapolate
from examples._reproductions_rows import change
from examples._reproductions_verdict import Row, prediction
from meanfield import growth_rates
from metrics import staircase
from particles import Ensemble, MultiHead, SaveAt, simulate


def _mode_rates(n, systems, t1, dt, rng, boot):
    """Growth rates of the Fourier powers (averaged over ``systems`` white-noise starts of n tokens, beta = 5),
    their bootstrap spread over systems, and the mode dominant at t1."""
    theta = rng.uniform(0.0, 2 * np.pi, (systems, n))
    ts = np.linspace(0.0, t1, int(round(t1 / dt / 2)) + 1)
    ens = Ensemble(np.eye(2), beta=np.full(systems, ps.BETA), chunk=8)
    run = simulate(np.stack([np.cos(theta), np.sin(theta)], axis=-1), ens, t1=t1, dt=dt, method="rk4",
                   save=SaveAt(ts=ts, x=False, fn=lambda t, x: {"power": ps.fourier_power(x)}), progress=False)
    power = run.saved["power"]  # (time, system, l)
    resampled = [ps.fit_rates(ts, power[:, rng.integers(0, systems, systems)].mean(axis=1)) for _ in range(boot)]
    return ps.fit_rates(ts, power.mean(axis=1)), np.std(resampled, axis=0), int(np.argmax(power[-1].mean(axis=0)) + 1)


def bpa_mode(ns=(128, 256, 512), systems=(32, 24, 16), t1=4.0, dt=0.1, seed=0, mode=3, boot=200) -> list:
    """Growth rate of the Fourier power of mode `mode` from white noise at beta = 5 along n, extrapolated to the
    mean-field limit n -> infinity (leading correction a/n), against sigma_mode of the linearised mean field;
    the runner-up sigma_l is the alternative. sigma per n: bootstrap over systems."""
    rng = np.random.default_rng(seed)
    sigma_l = growth_rates(MultiHead.scalar([1.0], d=2, beta=ps.BETA, kind="softmax"), l_max=ps.L_MAX)[1:]
    predicted = prediction("bpa_mode", sigma_l[mode - 1])
    runs = [_mode_rates(n, s, t1, dt, rng, boot) for n, s in zip(ns, systems)]
    rates, spread = np.array([r[0] for r in runs]), np.array([r[1] for r in runs])
    fit = extrapolate(np.array(ns, float), rates[:, mode - 1], spread[:, mode - 1], lambda n: 1.0 / n)
    return [Row("bpa_mode", fit["value"], fit["sigma"], "fit of rate(n) = rate_inf + a/n over the bootstraps over "
                f"systems ({boot} resamples), Birge-scaled, and the larger change when either end of the n sequence "
                "is dropped",
                predicted,
                alternative=float(np.delete(sigma_l, mode - 1).max()),
                params={"n": list(ns), "systems": list(systems), "T": t1, "dt": dt, "seed": seed, "beta": ps.BETA},
                curves={"mode": np.arange(1, ps.L_MAX + 1.0), "sigma_l": sigma_l, "rate": rates[-1],
                        "n": np.array(ns, float), "rate_n": rates[:, mode - 1], "rate_n_sigma": spread[:, mode - 1]},
                dims={"n": ("n",), "rate_n": ("n",), "rate_n_sigma": ("n",)},
                extra={"dominant_mode_at_T": runs[-1][2], "most_unstable_mode": int(np.argmax(sigma_l) + 1),
                       "a_over_n": fit["slope"], "chi2_per_dof": fit["chi2"]})]


def _plateau_spread(t, e, step) -> float:
    """Spread of the normalised energy over the middle half (in log time) of a plateau."""
    lo, hi = np.log(step.start), np.log(step.end)
    keep = (t >= np.exp(lo + (hi - lo) / 4)) & (t <= np.exp(hi - (hi - lo) / 4))
    return float(np.std(e[keep])) if keep.sum() >= 2 else float("nan")


def _staircase_jumps(beta, seed, per_decade, reach):
    """The first two merges of the staircase at ``beta``: (jump, definitional spread, 2 m_a m_b of the merging
    pair, the plateau identity with every cross term, 1 - cos of the pair's angle, the identity's correction
    (every cross term after the merge minus every one before), the pair's own cross term 2 m_a m_b e^{-beta (1 -
    cos theta_ab)}) each. The jump is read where the clusters are read: the energy at the two plateaus'
    midpoints in log time (a plateau's mean would take in part of the merge's ramp, by an amount set by the save
    grid and the plateau threshold, not by beta). The run lasts reach e^{beta (1 - cos 0.9)} (rescaled), past the
    second merge (gap 0.9)."""
    rng = np.random.default_rng(seed)
    theta = np.concatenate([c + 1e-3 * rng.standard_normal(k) for c, k in zip(ms.CENTRES, ms.COUNTS)])
    model = MultiHead.scalar([1.0], d=2, beta=beta, log_time_scale="auto")
    top = np.log10(reach) + beta * (1 - np.cos(0.9)) / np.log(10.0)
    ts = np.concatenate([[0.0], np.logspace(-2, top, int(per_decade * (top + 2)) + 1)])
    traj = simulate(np.stack([np.cos(theta), np.sin(theta)], axis=-1), model, t1=ts[-1], method="dopri5",
                    rtol=1e-8, atol=1e-10, save=SaveAt(ts=ts), progress=False)
    steps = staircase(model, traj)
    e = np.array([2 * beta * model.energy(x) / np.exp(beta) for x in traj.x])
    mids = [int(np.argmin(np.abs(traj.t - np.sqrt(s.start * s.end)))) for s in steps]  # as ms.merges reads them
    out = []
    for i, f in enumerate(ms.merges(traj, steps, beta)[:2]):
        ma, mb = f["masses"]
        spread = np.hypot(_plateau_spread(traj.t, e, steps[i]), _plateau_spread(traj.t, e, steps[i + 1]))
        correction = f["cross"][1] - f["cross"][0]
        out.append((e[mids[i + 1]] - e[mids[i]], spread, 2 * ma * mb, f["sumsq_jump"] + correction,
                    1 - np.cos(f["angle"]), correction, 2 * ma * mb * np.exp(-beta * (1 - np.cos(f["angle"])))))
    return np.array(out)


def gkpr_jumps(betas=(10.0, 12.0, 14.0, 16.0, 18.0), seed=0, per_decade=16, reach=100.0) -> list:
    """The energy jump of the first two merges of the staircase along beta, extrapolated to beta -> infinity,
    against the published jump 2 m_a m_b. The finite-beta correction is the one the plateau identity gives: every
    cross term m_c m_c' e^{-beta (1 - cos theta_cc')} after the merge minus every one before, each at the angle
    the clusters have at the plateau's midpoint (measured from the clusters, not from the energy; the angles
    drift with beta, so no single exponential fits); its amplitude is fitted (1 if the identity holds). sigma per
    point: the jump's definitional spread (the energy along the middle halves of the two plateaus it joins)."""
    jumps = np.array([_staircase_jumps(b, seed, per_decade, reach) for b in betas])  # (beta, merge, 7)
    rows = []
    for i in range(2):
        key = f"gkpr_jump{i + 1}"
        y, s, corr = jumps[:, i, 0], jumps[:, i, 1], jumps[:, i, 5]
        fit = extrapolate(corr, y, s, lambda c: c)
        pair = extrapolate(-jumps[:, i, 6], y, s, lambda c: c)
        rows.append(Row(key, fit["value"], fit["sigma"], "fit of J(beta) = J_inf + c x (the plateau identity's cross "
                        "terms at the measured angles) over the jumps' definitional spreads (Birge-scaled), and the "
                        "larger change when either end of the beta sequence is dropped",
                        prediction(key, jumps[-1, i, 2]),
                        params={"beta": list(betas), "counts": ms.COUNTS.tolist(), "seed": seed,
                                "per_decade": per_decade},
                        curves={"beta": np.array(betas), "jump": y, "jump_spread": s,
                                "all_cross_terms": jumps[:, i, 3], "one_minus_cos_ab": jumps[:, i, 4]},
                        extra={"amplitude": fit["slope"], "chi2_per_dof": fit["chi2"],
                               "limit_without_smallest_beta": fit["dropped"],
                               "limit_without_largest_beta": fit["dropped_near"],
                               "pair_term_only_limit": pair["value"], "pair_term_only_sigma": pair["sigma"],
                               "two_ma_mb": float(jumps[-1, i, 2]), "finite_beta": float(betas[0]),
                               "finite_jump": float(y[0]), "finite_spread": float(s[0]),
                               "finite_all_cross_terms": float(jumps[0, i, 3])}))
    return rows


def _mode1_rate(cells, kappa, beta, lam, t1=3.0):
    """Growth rate of the mode-1 amplitude of 1 + 1e-3 cos(theta) under the noisy finite-volume flow."""
    pts, areas = mf.circle_grid(cells)
    mu = mf.GridMeasure.from_density(pts, areas, lambda y: 1 + 1e-3 * np.cos(np.arctan2(y[:, 1], y[:, 0])))
    res = mf.wasserstein_ascent(mu, MultiHead.scalar([lam], d=2, beta=beta, kind="softmax"), t1=t1, n_saves=7,
                                scheme="fv_circle", kappa=kappa)
    amp = np.array([abs(np.fft.rfft(p)[1]) for p in res.mass])
    return float(np.polyfit(res.t[:3], np.log(amp[:3]), 1)[0])


def noise_threshold(beta=2.0, lam=1.0, cells=(64, 128)) -> list:
    """Mode-1 growth rate of the noisy uniform state on S^1 at kappa = 2 kappa* (finite volumes) against the
    closed form sigma_1(kappa) of meanfield.stability; control: the run at kappa*/2 (stable), which must not
    grow at the unstable rate. sigma: the change from the coarse to the fine grid."""
    kstar = mf.critical_kappa(beta, lam=lam, kind="softmax")
    predicted = mf.uniform_growth_rate(beta, lam=lam, kind="softmax", kappa=2 * kstar)
    rows = []
    for key, factor, of in (("noise_threshold", 2.0, ""), ("noise_threshold_control", 0.5, "noise_threshold")):
        coarse, fine = (_mode1_rate(m, factor * kstar, beta, lam) for m in cells)
        rows.append(Row(key, fine, change(fine, coarse, 1e-12), f"change from {cells[0]} to {cells[1]} cells",
                        prediction(key, predicted), control_of=of,
                        params={"beta": beta, "lambda": lam, "kappa_over_kappa_star": factor, "cells": list(cells)},
                        extra={"kappa_star": float(kstar)}))
    return rows
