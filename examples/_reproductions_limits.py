"""Limit statements of docs/reproductions.md, measured along the sequence their limit runs over.

A statement that holds as d -> infinity (GLPR's phase diagram), as rho0 -> 0 (Theorem 25's linearised time)
or as beta -> infinity (GKPR's staircase) is measured at several points of that sequence; the leading
correction is fitted by weighted least squares (:func:`extrapolate`) and the extrapolated value, with its
uncertainty, is compared with the statement. The finite points stay in the dataset (``curves``) for the page
and the figures.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from examples._reproductions_verdict import Row, prediction
from particles import theory as th


def _wls(x, y, sigma, basis):
    """Weighted least squares y = c0 + c1 basis(x): (c0, its standard error scaled by sqrt(chi^2/dof) when that
    exceeds 1 (the Birge ratio: a model that misses the points widens its own error), c1, chi^2/dof)."""
    a = np.c_[np.ones_like(x), basis(x)] / sigma[:, None]
    coef, *_ = np.linalg.lstsq(a, y / sigma, rcond=None)
    cov = np.linalg.inv(a.T @ a)
    dof = len(x) - 2
    chi2 = float(np.sum((a @ coef - y / sigma) ** 2) / dof) if dof > 0 else 1.0
    return float(coef[0]), float(np.sqrt(cov[0, 0] * max(chi2, 1.0))), float(coef[1]), chi2


def extrapolate(x, y, sigma, basis, far: int = 0) -> dict:
    """The limit c0 of y = c0 + c1 basis(x) (basis -> 0 at the limit) with its uncertainty: the fit's standard
    error (Birge-scaled) and, with three or more points, the larger change of c0 when either end point of the
    sequence is dropped (a convergence study of the fit: the point farthest from the limit, index ``far``, tests
    the model's reach; the point nearest to it tests whether the sequence still follows the model there).
    Returns value, sigma, slope, chi2, dropped (without ``far``) and dropped_near (without the other end)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    s = np.maximum(np.asarray(sigma, float), 1e-15)
    c0, se, c1, chi2 = _wls(x, y, s, basis)
    ends = (far % len(x), (len(x) - 1 - far) % len(x))
    drop = [_wls(x[k], y[k], s[k], basis)[0] if len(x) >= 3 else c0
            for k in (np.arange(len(x)) != e for e in ends)]
    change = max(abs(c0 - d) for d in drop)
    return {"value": c0, "sigma": float(np.hypot(se, change)), "slope": c1, "chi2": chi2,
            "dropped": drop[0], "dropped_near": drop[1]}


# ------------------------------------------------------------------ GLPR phase diagram (arXiv:2312.10794)
def _clustered(kind, d, n, t1, betas, systems, seed, method, dt, merge):
    from metrics import phase_diagram

    ds = phase_diagram(np.asarray(betas, float), n=n, d=d, kind=kind, t1=t1, n_systems=systems, chunk=64,
                       n_saves=2, method=method, dt=dt, rtol=1e-6, merge=merge, seed=seed, progress=False)
    return ds.clustered_pairs.isel(time=-1).values, ds.clustered_pairs_se.isel(time=-1).values


def half_crossing(kind, d, *, n, t1, lo, hi, systems, seed, method, dt, merge, points=9, resolve=0.25, levels=6):
    """beta where the fraction of clustered pairs at t1 crosses 1/2, and its standard error (the systems' standard
    error at the crossing over the local slope). The grid is refined around the measured crossing (``points``
    betas in the bracket, up to ``levels`` times) until the bracket spans less than ``resolve`` of the
    transition: the interpolation error is then negligible rather than added to sigma. The grid never depends
    on the prediction. Returns (beta, sigma, change from the previous grid, final spacing)."""
    a, b, prev = lo, hi, np.nan
    for _ in range(levels):
        betas = np.linspace(a, b, points)
        y, se = _clustered(kind, d, n, t1, betas, systems, seed, method, dt, merge)
        side = y >= 0.5
        k = int(np.argmax(side != side[0]))
        if k == 0:
            return np.nan, np.nan, np.nan, np.nan
        w = (0.5 - y[k - 1]) / (y[k] - y[k - 1])
        beta = float(betas[k - 1] + w * (betas[k] - betas[k - 1]))
        slope = abs(y[k] - y[k - 1]) / (betas[k] - betas[k - 1])
        sigma = float(((1 - w) * se[k - 1] + w * se[k]) / slope)
        moved, prev = abs(beta - prev), beta
        if abs(y[k] - y[k - 1]) <= resolve:
            break
        a, b = betas[k - 1], betas[k]
    return beta, sigma, float(moved), float(betas[1] - betas[0])


#: GLPR's settings per kind: the examples/phase_diagram.py integrators, the starting bracket of the beta grid
GLPR = {"usa": {"t1": 1.0, "method": "dopri5_systems", "dt": 1e-4, "merge": 1e-6, "lo": 3.0, "hi": 6.0},
        "softmax": {"t1": 30.0, "method": "rk4", "dt": 0.5, "merge": 0.0, "lo": 5.0, "hi": 8.5}}


def glpr_limit(kind="usa", ds=(256, 1024, 4096), n=32, systems=64, seed=0, control_d=8) -> list:
    """The half-clustered crossing along d, extrapolated to d -> infinity with its leading 1/d correction,
    against the beta where the equiangular time t*(beta) = T (the d -> infinity curve). Control: the crossing
    at d = control_d, where the statement does not claim to hold."""
    g = GLPR[kind]
    key = f"glpr_{kind}"
    raw = brentq(lambda b: th.hitting_time(0.0, 0.999, lambdas=[1.0], beta=b, n=n, kind=kind) - g["t1"], 0.1, 20.0,
                 xtol=1e-12)
    target = prediction(key, raw)
    run = {k: g[k] for k in ("t1", "method", "dt", "merge", "lo", "hi")}
    pts = np.array([half_crossing(kind, d, n=n, systems=systems, seed=seed, **run) for d in ds])
    fit = extrapolate(np.array(ds, float), pts[:, 0], pts[:, 1], lambda d: 1.0 / d)
    params = {"kind": kind, "d": list(ds), "n": n, "T": g["t1"], "systems": systems, "seed": seed}
    row = Row(key, fit["value"], fit["sigma"], "weighted fit of beta(d) = beta_inf + a/d over the systems' standard "
              "errors (Birge-scaled), and the larger change when either end of the d sequence is dropped", target,
              params=params,
              curves={"d": np.array(ds, float), "crossing": pts[:, 0], "crossing_sigma": pts[:, 1],
                      "grid_change": pts[:, 2], "spacing": pts[:, 3]},
              extra={"a_over_d": fit["slope"], "chi2_per_dof": fit["chi2"], "limit_without_smallest_d": fit["dropped"],
                     "limit_without_largest_d": fit["dropped_near"],
                     **_finite_point(ds, pts, 1)})
    cp = half_crossing(kind, control_d, n=n, systems=systems, seed=seed, **run)
    control = Row(f"{key}_control", cp[0], cp[1], f"standard error over {systems} systems at the crossing over the "
                  "slope (refined grid)", prediction(f"{key}_control", raw), control_of=key,
                  params={**params, "d": control_d})
    return [row, control]


def _finite_point(ds, pts, i) -> dict:
    """Point i of the sequence against the limit plus the 1/d offset fitted on the *other* points."""
    keep = np.arange(len(ds)) != i
    fit = extrapolate(np.array(ds, float)[keep], pts[keep, 0], pts[keep, 1], lambda d: 1.0 / d, far=-1)
    return {"finite_d": int(ds[i]), "finite_measured": float(pts[i, 0]), "finite_sigma": float(pts[i, 1]),
            "finite_expected": fit["value"] + fit["slope"] / ds[i]}
