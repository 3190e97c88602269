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
from examples._reproductions_rows import change
from examples._reproductions_verdict import Row
from meanfield import growth_rates
from metrics import staircase
from particles import Ensemble, MultiHead, SaveAt, simulate


def bpa_mode(n=512, systems=24, t1=4.0, dt=0.1, seed=0, mode=3, boot=200) -> list:
    """Growth rate of the Fourier power of mode `mode` from white noise at beta = 5, against sigma_mode of
    the linearised mean field; the runner-up sigma_l is the alternative. sigma: bootstrap over systems."""
    rng = np.random.default_rng(seed)
    theta = rng.uniform(0.0, 2 * np.pi, (systems, n))
    ts = np.linspace(0.0, t1, int(round(t1 / dt / 2)) + 1)
    ens = Ensemble(np.eye(2), beta=np.full(systems, ps.BETA), chunk=8)
    run = simulate(np.stack([np.cos(theta), np.sin(theta)], axis=-1), ens, t1=t1, dt=dt, method="rk4",
                   save=SaveAt(ts=ts, x=False, fn=lambda t, x: {"power": ps.fourier_power(x)}))
    power = run.saved["power"]  # (time, system, l)
    rates = ps.fit_rates(ts, power.mean(axis=1))
    resampled = [ps.fit_rates(ts, power[:, rng.integers(0, systems, systems)].mean(axis=1))[mode - 1]
                 for _ in range(boot)]
    sigma_l = growth_rates(MultiHead.scalar([1.0], d=2, beta=ps.BETA, kind="softmax"), l_max=ps.L_MAX)[1:]
    others = np.delete(sigma_l, mode - 1)
    return [Row("bpa_mode", rates[mode - 1], np.std(resampled), f"bootstrap over the {systems} systems ({boot} "
                "resamples)", sigma_l[mode - 1], alternative=float(others.max()),
                params={"n": n, "systems": systems, "T": t1, "dt": dt, "seed": seed, "beta": ps.BETA},
                curves={"mode": np.arange(1, ps.L_MAX + 1.0), "sigma_l": sigma_l, "rate": rates},
                extra={"dominant_mode_at_T": int(np.argmax(power[-1].mean(axis=0)) + 1),
                       "most_unstable_mode": int(np.argmax(sigma_l) + 1)})]


def _plateau_spread(t, e, step) -> float:
    """Spread of the normalised energy over the middle half (in log time) of a plateau."""
    lo, hi = np.log(step.start), np.log(step.end)
    keep = (t >= np.exp(lo + (hi - lo) / 4)) & (t <= np.exp(hi - (hi - lo) / 4))
    return float(np.std(e[keep])) if keep.sum() >= 2 else float("nan")


def gkpr_jumps(t_max_log10=3.5, saves=81, seed=0) -> list:
    """The energy jump at each merge of the staircase against the finite-beta prediction
    2 m_a m_b (1 - e^{beta (cos theta_ab - 1)}) (the pair's cross term disappears); alternative: the
    beta -> infinity value 2 m_a m_b. sigma: the spread of the energy over both plateaus."""
    rng = np.random.default_rng(seed)
    theta = np.concatenate([c + 1e-3 * rng.standard_normal(k) for c, k in zip(ms.CENTRES, ms.COUNTS)])
    model = MultiHead.scalar([1.0], d=2, beta=ms.BETA, log_time_scale="auto")
    ts = np.concatenate([[0.0], np.logspace(-2, t_max_log10, saves)])
    traj = simulate(np.stack([np.cos(theta), np.sin(theta)], axis=-1), model, t1=ts[-1], method="dopri5",
                    rtol=1e-8, atol=1e-10, save=SaveAt(ts=ts))
    steps = staircase(model, traj)
    e = np.array([2 * ms.BETA * model.energy(x) / np.exp(ms.BETA) for x in traj.x])
    rows = []
    for i, f in enumerate(ms.merges(traj, steps)[:2]):
        ma, mb = f["masses"]
        sig = np.hypot(_plateau_spread(traj.t, e, steps[i]), _plateau_spread(traj.t, e, steps[i + 1]))
        rows.append(Row(f"gkpr_jump{i + 1}", f["energy_jump"], sig, "spread of the energy over the middle halves of "
                        "the two plateaus", 2 * ma * mb * (1 - np.exp(ms.BETA * (np.cos(f["angle"]) - 1))),
                        alternative=2 * ma * mb, params={"beta": ms.BETA, "counts": ms.COUNTS.tolist(),
                                                         "T": float(ts[-1]), "seed": seed},
                        extra={"masses": [float(ma), float(mb)], "angle": float(f["angle"]), "rank": f["rank"],
                               # the plateau identity with every cross term: what the finite-beta law leaves out
                               "jump_all_cross_terms": float(f["sumsq_jump"] + f["cross"][1] - f["cross"][0])}))
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
                        predicted, control_of=of, params={"beta": beta, "lambda": lam, "kappa_over_kappa_star": factor,
                                                          "cells": list(cells)},
                        extra={"kappa_star": float(kstar)}))
    return rows
