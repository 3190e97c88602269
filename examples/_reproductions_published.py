"""Published results behind docs/reproductions.md, measured with headflow's particles (part 1 of 2).

Late and ReLU rates of arXiv:2605.04279 (Theorems 22 and 25), the long-context scaling
n^{2/(d-1)} (arXiv:2605.08505) and the Post-LN / Pre-LN collapse rates (arXiv:2512.01868). Each
function returns a list of :class:`~examples._reproductions_verdict.Row`: the row(s), then the
controls (the same measurement where the statement must fail).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from examples._reproductions_limits import extrapolate
from examples._reproductions_rows import pairwise_one_minus_cos, top_weight
from examples._reproductions_verdict import Row, prediction
from particles import MultiHead, SaveAt, sample_uniform, simulate
from particles import theory as th


def _slope(t, y):
    return float(np.polyfit(t, y, 1)[0])


# ------------------------------------------------------------------ Theorem 22 (late rate)
def _late_slope(kind, lambdas, beta, n, t0, t1):
    model = MultiHead.scalar(list(lambdas), d=n, beta=beta, kind=kind)
    ts = np.linspace(t0, t1, 13)
    run = simulate(th.orthogonal_tokens(n), model, t1=t1, method="dopri5", rtol=1e-10, atol=1e-13,
                   save=SaveAt(ts=np.r_[0.0, ts]))
    gap = pairwise_one_minus_cos(run.x[1:]).mean(axis=1)
    early, late = -_slope(ts[:7], np.log(gap[:7])), -_slope(ts[6:], np.log(gap[6:]))
    return late, abs(late - early), ts[6:], gap[6:]


def theorem22_late_rate(lambdas=(0.6, 0.4), beta=1.0, n=4, t=(6.0, 9.0)) -> list:
    """Slope of -log(1 - rho) of a particle run (orthogonal start) on t in [t0, t1] against 2 Lambda;
    control: USA heads of the same strengths (late rate 2 sum_h lambda_h e^{beta lambda_h})."""
    t0 = 2 * t[0] - t[1]  # the window before, for the drift of the slope
    rows = []
    for key, kind, of in (("thm22_late", "softmax", ""), ("thm22_late_control", "usa", "thm22_late")):
        late, drift, ts, gap = _late_slope(kind, lambdas, beta, n, t0, t[1])
        rows.append(Row(key, late, drift, f"change of the slope from t in [{t0:g}, {t[0]:g}] to [{t[0]:g}, {t[1]:g}]",
                        prediction(key, th.late_rate(list(lambdas))), control_of=of,
                        params={"lambdas": list(lambdas), "beta": beta, "n": n, "window": list(t), "kind": kind},
                        curves={} if of else {"t": ts, "one_minus_rho": gap}))
    return rows


# ------------------------------------------------------------------ Theorem 25 (ReLU)
def _hitting_time_particles(model, rho0, rho1, n, t1, rtol):
    """First time the particles' mean overlap reaches rho1 from equiangular rho0 (dopri5, saved at every
    accepted step, linear interpolation between the two steps around the crossing)."""
    run = simulate(th.equiangular_tokens(n, rho0), model, t1=t1, method="dopri5", rtol=rtol, atol=1e-12,
                   save=SaveAt(every=1, t0=True, x=False,
                               fn=lambda t, x: {"rho": 1 - pairwise_one_minus_cos(x).mean()}))
    ts, rho = run.t, run.saved["rho"]
    k = int(np.argmax(rho >= rho1))
    return ts[k - 1] + (rho1 - rho[k - 1]) * (ts[k] - ts[k - 1]) / (rho[k] - rho[k - 1])


def _decade_costs(kind, n, beta, rho0s, rho1, rtol):
    """Extra hitting time of rho1 for each decade of rho0: T(rho0s[i + 1]) - T(rho0s[i])."""
    model = MultiHead.scalar([1.0], d=n, beta=beta, kind=kind)
    t1 = n * np.log(1 / min(rho0s)) / beta + 5.0  # twice the linearised time: the crossing is inside
    T = [_hitting_time_particles(model, r, rho1, n, t1, rtol) for r in rho0s]
    return np.diff(T)


def theorem25_relu(n=6, beta=1.0, rho0s=(1e-2, 1e-3, 1e-4, 1e-5, 1e-6), rho1=0.5) -> list:
    """Theorem 25's linearised time n log(1/rho0) / (2 beta) as rho0 -> 0: the ReLU particles' cost of one decade
    of rho0, measured down the decades and extrapolated (its bias is of order rho0), against n ln 10 / (2 beta);
    control: softmax particles (O(1) per decade). Then the consistency check: the first decade's cost against
    the exact integral of the equiangular ODE the particles follow by symmetry; control: USA particles."""
    raw = n * np.log(10.0) / (2 * beta)
    linear = prediction("thm25_relu", raw)
    exact_raw = th.hitting_time(rho0s[1], rho0s[0], lambdas=[1.0], beta=beta, n=n, kind="relu")
    exact = prediction("thm25_relu_ode", exact_raw)
    params = {"n": n, "beta": beta, "rho0": list(rho0s), "rho1": rho1}
    how = "change from rtol 1e-7 to 1e-10"
    rows = []
    for key, kind, of in (("thm25_relu", "relu", ""), ("thm25_relu_control", "softmax", "thm25_relu")):
        tight, loose = (_decade_costs(kind, n, beta, rho0s, rho1, r) for r in (1e-10, 1e-7))
        sig = np.maximum(np.abs(tight - loose), 1e-9)
        fit = extrapolate(np.array(rho0s[:-1]), tight, sig, lambda r: r)
        rows.append(Row(key, fit["value"], fit["sigma"], "fit of the decade cost c(rho0) = c0 + a rho0 over the "
                        f"solver change ({how}), Birge-scaled, and the larger change when either end of the rho0 "
                        "sequence is dropped",
                        prediction(key, raw), control_of=of,
                        params={**params, "kind": kind},
                        curves={} if of else {"rho0": np.array(rho0s[:-1]), "decade_cost": tight},
                        extra={"first_decade": float(tight[0]), "first_decade_sigma": float(sig[0])}))
        if not of:
            ode = Row("thm25_relu_ode", tight[0], sig[0], how, exact, alternative=linear,
                      params={**params, "rho0": list(rho0s[:2]), "kind": kind})
    tight, loose = (_decade_costs("usa", n, beta, rho0s[:2], rho1, r)[0] for r in (1e-10, 1e-7))
    control = Row("thm25_relu_ode_control", tight, max(abs(tight - loose), 1e-9), how,
                  prediction("thm25_relu_ode_control", exact_raw), control_of="thm25_relu_ode",
                  params={**params, "rho0": list(rho0s[:2]), "kind": "usa"})
    return [rows[0], ode, rows[1], control]


# ------------------------------------------------------------------ long-context scaling (arXiv:2605.08505)
def _context_slope(d, ns, draws, rng, level, boot):
    """Slope of log (geometric mean over draws of the beta at which the top key's weight reaches `level`) against
    log n (fixed query, n uniform keys on S^{d-1}), its bootstrap spread over draws, and the betas."""
    q = np.zeros(d)
    q[-1] = 1.0
    betas = np.empty((len(ns), draws))
    for a, n in enumerate(ns):
        for r in range(draws):
            keys = sample_uniform(n, d=d, rng=rng)
            betas[a, r] = np.exp(brentq(lambda lb, k=keys: top_weight(q, k, np.exp(lb)) - level, -5.0, 40.0,
                                        xtol=1e-10))
    logn = np.log(ns)
    slope = _slope(logn, np.log(betas).mean(axis=1))
    resampled = [_slope(logn, np.log(betas[:, rng.integers(0, draws, draws)]).mean(axis=1)) for _ in range(boot)]
    return slope, float(np.std(resampled)), betas


def long_context(d=3, ns=(1000, 10000), draws=12, seed=0, level=0.5, boot=200) -> list:
    """The slope of log beta*_n against log n (:func:`_context_slope`) against 2/(d - 1). Alternative: 2/d (the
    exponent of the nearest key's angle squared in the wrong dimension). sigma: bootstrap over draws.
    Control: the same measurement in dimension d + 1 (new keys), against the same 2/(d - 1)."""
    key = f"long_context_d{d}"
    raw = 2.0 / (d - 1)
    predicted = prediction(key, raw)
    slope, sigma, betas = _context_slope(d, ns, draws, np.random.default_rng(seed), level, boot)
    cslope, csigma, _ = _context_slope(d + 1, ns, draws, np.random.default_rng(seed + 1), level, boot)
    how = f"bootstrap over the {draws} draws ({boot} resamples)"
    params = {"d": d, "n": list(ns), "draws": draws, "seed": seed, "level": level}
    curves = {"n": np.array(ns, float), "beta_star": np.exp(np.log(betas).mean(axis=1))}
    return [Row(key, slope, sigma, how, predicted, alternative=2.0 / d, params=params, curves=curves),
            Row(f"{key}_control", cslope, csigma, how, prediction(f"{key}_control", raw), control_of=key,
                params={**params, "d": d + 1, "seed": seed + 1})]


# ------------------------------------------------------------------ Post-LN vs Pre-LN (arXiv:2512.01868)
def _norm_run(model, x0, a, b, logt):
    ts = np.geomspace(a, b, 13) if logt else np.linspace(a, b, 13)
    run = simulate(x0, model, t1=b, method="dopri5", rtol=1e-11, atol=1e-13, save=SaveAt(ts=np.r_[0.0, ts]),
                   progress=False)
    return ts, pairwise_one_minus_cos(run.x[1:]).mean(axis=1)


def _law_row(key, ts, gap, logt, of, params):
    u = np.log(ts) if logt else ts
    y = np.log(gap)
    drift = _slope(u[:7], y[:7]) - _slope(u[6:], y[6:])
    law = "log t" if logt else "t"
    return Row(key, _slope(u, y), abs(drift), f"drift of the slope on {law} between the halves of the window",
               prediction(key, -2.0), control_of=of, params={**params, "fit_on": law},
               curves={} if of else {"t": ts, "one_minus_rho": gap})


def norm_rates(n=4, beta=1.0, t_post=(6.0, 10.0), t_pre=(200.0, 2000.0)) -> list:
    """1 - rho of orthogonal tokens, one softmax head M = W = I: slope -2 of its log on t on the sphere (Post-LN),
    on log t in flat space with attention on the normalised tokens (Pre-LN). Controls, new runs: USA heads on
    the sphere (rate 2 e^beta, not 2) fitted on t; the sphere flow saved on a log grid, fitted on log t."""
    x0 = th.orthogonal_tokens(n)
    post = MultiHead(np.eye(n), beta=beta, kind="softmax")
    pre = MultiHead(np.eye(n), beta=beta, kind="softmax", geometry="flat", update="pre_ln")
    usa = MultiHead(np.eye(n), beta=beta, kind="usa")
    base = {"n": n, "beta": beta}
    post_w, pre_w = {**base, "window": list(t_post)}, {**base, "window": list(t_pre)}
    return [_law_row("post_ln_rate", *_norm_run(post, x0, *t_post, logt=False), False, "", post_w),
            _law_row("pre_ln_power", *_norm_run(pre, x0, *t_pre, logt=True), True, "", pre_w),
            _law_row("post_ln_rate_control", *_norm_run(usa, x0, *t_post, logt=False), False, "post_ln_rate",
                     {**post_w, "kind": "usa"}),
            _law_row("pre_ln_power_control", *_norm_run(post, x0, *t_post, logt=True), True, "pre_ln_power",
                     {**post_w, "geometry": "sphere"})]
