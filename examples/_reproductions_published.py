"""Published results behind docs/reproductions.md, measured with headflow's particles (part 1 of 2).

Late and ReLU rates of arXiv:2605.04279 (Theorems 22 and 25), the long-context scaling
n^{2/(d-1)} (arXiv:2605.08505) and the Post-LN / Pre-LN collapse rates (arXiv:2512.01868). Each
function returns a list of :class:`~examples._reproductions_verdict.Row`: the row(s), then the
controls (the same measurement where the statement must fail).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from examples._reproductions_rows import change, pairwise_one_minus_cos, top_weight
from examples._reproductions_verdict import Row
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
                        th.late_rate(list(lambdas)), control_of=of,
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


def _decade_cost(kind, n, beta, rho0s, rho1, rtol):
    model = MultiHead.scalar([1.0], d=n, beta=beta, kind=kind)
    t1 = n * np.log(1 / min(rho0s)) / beta + 5.0  # twice the linearised time: the crossing is inside
    T = [_hitting_time_particles(model, r, rho1, n, t1, rtol) for r in rho0s]
    return T[1] - T[0]


def theorem25_relu(n=6, beta=1.0, rho0s=(1e-2, 1e-3), rho1=0.5) -> list:
    """ReLU particles: the extra time for one decade of rho0 against the exact integral of the equiangular
    ODE (its linearisation n ln 10 / (2 beta) is the alternative); control: softmax particles (O(1))."""
    exact = th.hitting_time(rho0s[1], rho0s[0], lambdas=[1.0], beta=beta, n=n, kind="relu")
    linear = n * np.log(rho0s[0] / rho0s[1]) / (2 * beta)
    params = {"n": n, "beta": beta, "rho0": list(rho0s), "rho1": rho1}
    rows = []
    for key, kind, of in (("thm25_relu", "relu", ""), ("thm25_relu_control", "softmax", "thm25_relu")):
        tight, loose = (_decade_cost(kind, n, beta, rho0s, rho1, r) for r in (1e-10, 1e-7))
        rows.append(Row(key, tight, change(tight, loose, 1e-9), "change from rtol 1e-7 to 1e-10", exact,
                        alternative=linear, control_of=of, params={**params, "kind": kind},
                        extra={"linearised": linear}))
    return rows


# ------------------------------------------------------------------ long-context scaling (arXiv:2605.08505)
def long_context(d=3, ns=(1000, 10000), draws=12, seed=0, level=0.5, boot=200) -> list:
    """Geometric mean over draws of the beta at which the top key's weight reaches `level` (fixed query, n
    uniform keys on S^{d-1}); the slope of its log against log n, against 2/(d - 1). Alternative: 2/d (the
    exponent of the nearest key's angle squared in the wrong dimension). sigma: bootstrap over draws.
    Control: the same slope against 2/d."""
    rng = np.random.default_rng(seed)
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
    resampled = [_slope(logn, np.log(betas[:, rng.integers(0, draws, draws)]).mean(axis=1))
                 for _ in range(boot)]
    how, key = f"bootstrap over the {draws} draws ({boot} resamples)", f"long_context_d{d}"
    params = {"d": d, "n": list(ns), "draws": draws, "seed": seed, "level": level}
    curves = {"n": np.array(ns, float), "beta_star": np.exp(np.log(betas).mean(axis=1))}
    return [Row(key, slope, np.std(resampled), how, 2.0 / (d - 1), alternative=2.0 / d, params=params, curves=curves),
            Row(f"{key}_control", slope, np.std(resampled), how, 2.0 / d, control_of=key, params=params)]


# ------------------------------------------------------------------ Post-LN vs Pre-LN (arXiv:2512.01868)
def _norm_run(model, x0, a, b, logt):
    ts = np.geomspace(a, b, 13) if logt else np.linspace(a, b, 13)
    run = simulate(x0, model, t1=b, method="dopri5", rtol=1e-11, atol=1e-13, save=SaveAt(ts=np.r_[0.0, ts]))
    return ts, pairwise_one_minus_cos(run.x[1:]).mean(axis=1)


def _law_row(key, ts, gap, logt, of, params):
    u = np.log(ts) if logt else ts
    y = np.log(gap)
    drift = _slope(u[:7], y[:7]) - _slope(u[6:], y[6:])
    law = "log t" if logt else "t"
    return Row(key, _slope(u, y), abs(drift), f"drift of the slope on {law} between the halves of the window",
               -2.0, control_of=of, params={**params, "fit_on": law},
               curves={} if of else {"t": ts, "one_minus_rho": gap})


def norm_rates(n=4, beta=1.0, t_post=(6.0, 10.0), t_pre=(200.0, 2000.0)) -> list:
    """1 - rho of orthogonal tokens, one softmax head M = W = I: slope -2 of its log on t on the sphere
    (Post-LN), on log t in flat space with attention on the normalised tokens (Pre-LN). Controls: each run
    fitted with the other law."""
    x0 = th.orthogonal_tokens(n)
    post = MultiHead(np.eye(n), beta=beta, kind="softmax")
    pre = MultiHead(np.eye(n), beta=beta, kind="softmax", geometry="flat", update="pre_ln")
    tp, gp = _norm_run(post, x0, *t_post, logt=False)
    tq, gq = _norm_run(pre, x0, *t_pre, logt=True)
    base = {"n": n, "beta": beta}
    return [_law_row("post_ln_rate", tp, gp, False, "", {**base, "window": list(t_post)}),
            _law_row("pre_ln_power", tq, gq, True, "", {**base, "window": list(t_pre)}),
            _law_row("post_ln_rate_control", tp, gp, True, "post_ln_rate", {**base, "window": list(t_post)}),
            _law_row("pre_ln_power_control", tq, gq, False, "pre_ln_power", {**base, "window": list(t_pre)})]


# ------------------------------------------------------------------ GLPR phase diagram (arXiv:2312.10794)
def _half_crossing(betas, y, se):
    """beta where y first crosses 1/2 (linear interpolation) and its standard error se / |dy/dbeta| there."""
    side = y >= 0.5
    k = int(np.argmax(side != side[0]))
    if k == 0:
        return float("nan"), float("nan")
    slope = abs(y[k] - y[k - 1]) / (betas[k] - betas[k - 1])
    w = (0.5 - y[k - 1]) / (y[k] - y[k - 1])
    return float(betas[k - 1] + w * (betas[k] - betas[k - 1])), float(((1 - w) * se[k - 1] + w * se[k]) / slope)


#: the full grid of glpr_phase: spacing 0.125 across the USA transition at T = 1
GLPR_BETAS = tuple(np.linspace(3.5, 6.0, 21))


def glpr_phase(kind="usa", d=1024, n=32, t1=1.0, betas=GLPR_BETAS, systems=64, seed=0, control_d=8,
               method="dopri5_systems", dt=1e-4, merge=1e-6) -> list:
    """beta where half the pairs of n random tokens are clustered (<x_i, x_j> >= 0.999) at t1, against the
    beta where the equiangular time t*(beta) = t1; control: the same in d = control_d, far from the
    orthogonal start the curve assumes. sigma: the systems' standard error at the crossing over the slope,
    and the change of the crossing when every second beta of the grid is dropped (interpolation)."""
    from metrics import phase_diagram

    target = brentq(lambda b: th.hitting_time(0.0, 0.999, lambdas=[1.0], beta=b, n=n, kind=kind) - t1,
                    0.1, 20.0, xtol=1e-12)
    rows = []
    for key, dim, of in ((f"glpr_{kind}", d, ""), (f"glpr_{kind}_control", control_d, f"glpr_{kind}")):
        ds = phase_diagram(np.array(betas), n=n, d=dim, kind=kind, t1=t1, n_systems=systems, chunk=64, n_saves=5,
                           method=method, dt=dt, rtol=1e-6, merge=merge, seed=seed, progress=False)
        y, se = ds.clustered_pairs.isel(time=-1).values, ds.clustered_pairs_se.isel(time=-1).values
        beta_half, sigma = _half_crossing(np.array(betas), y, se)
        coarse, _ = _half_crossing(np.array(betas)[::2], y[::2], se[::2])
        params = {"kind": kind, "d": dim, "n": n, "T": t1, "betas": [min(betas), max(betas)], "systems": systems,
                  "seed": seed}
        rows.append(Row(key, beta_half, np.hypot(sigma, beta_half - coarse), f"standard error over {systems} "
                        "systems at the crossing over the slope, and the change on a grid twice as coarse", target,
                        control_of=of, params=params,
                        curves={} if of else {"beta": np.array(betas), "clustered_pairs": y}))
    return rows
