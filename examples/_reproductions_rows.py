"""Consistency checks behind docs/reproductions.md: the library's own closed forms against its particles.

Each function runs headflow at the sizes it is given and returns a list of
:class:`~examples._reproductions_verdict.Row`: the row, then its control (the same measurement where
the identity must fail). These rows follow from a definition or a linearisation (beta* is defined so
that the cosine equals c*): they check the code, not a published result. Shared helpers of the
other row modules live here too.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from examples._reproductions_verdict import Row, prediction
from particles import MultiHead, SaveAt, diagnose, sample_uniform, simulate
from particles import theory as th
from particles.summation import exp_sums

EPS = np.finfo(float).eps


def pairwise_one_minus_cos(x) -> np.ndarray:
    """1 - <u_i, u_j> of the directions u = x/|x|, i < j, as |u_i - u_j|^2 / 2 (no cancellation)."""
    u = x / np.linalg.norm(x, axis=-1, keepdims=True)
    i, j = np.triu_indices(x.shape[-2], 1)
    return 0.5 * np.sum((u[..., i, :] - u[..., j, :]) ** 2, axis=-1)


def spread(values, floor: float) -> float:
    """Standard deviation of repeated measurements, at least ``floor`` (their round-off or solver tolerance)."""
    return max(float(np.std(values)), float(floor))


def change(a, b, floor: float) -> float:
    """How much a result moved in a convergence study (``|a - b|``), at least ``floor``."""
    return max(abs(float(a) - float(b)), float(floor))


# ------------------------------------------------------------------ Theorem 19 of arXiv:2605.04279
def _inverse_cos(n, alpha, beta, frame):
    model = MultiHead.scalar([alpha, alpha], d=n, beta=beta, kind="softmax")
    return 1.0 / np.ravel(diagnose(model, th.orthogonal_tokens(n, rng=frame))["cos_angle"])


def theorem19_cosine(n=20, alpha=0.8, frames=4) -> list:
    """1/cos angle(f_i, x_i) at beta*(H = 2) against the golden ratio 1/c*(2); control: at 1.1 beta*."""
    bstar, golden = th.beta_star(2, n=n, alpha=alpha), (1 + np.sqrt(5)) / 2
    rows = []
    for key, beta, of in (("thm19_golden", bstar, ""), ("thm19_golden_control", 1.1 * bstar, "thm19_golden")):
        vals = np.concatenate([_inverse_cos(n, alpha, beta, f) for f in range(frames)])
        rows.append(Row(key, vals.mean(), spread(vals, 4 * EPS * golden),
                        f"spread over the tokens of {frames} random orthogonal frames (floor 4 ulp)",
                        prediction(key, golden),
                        control_of=of, params={"n": n, "alpha": alpha, "H": 2, "beta": beta,
                                                      "frames": list(range(frames))}))
    return rows


def _margin_root(H, n, alpha, frame, bstar):
    x = th.orthogonal_tokens(n, rng=frame)

    def margin(b):
        return float(diagnose(MultiHead.scalar([alpha] * H, d=n, beta=b, kind="usa"), x)["rd_margin_min"].min())

    return brentq(margin, 0.5 * bstar, 1.5 * bstar, xtol=1e-13, rtol=1e-13)


def theorem19_beta_star(H=3, n=20, alpha=0.8, frames=(3, 4)) -> list:
    """The beta where the radial-dominance margin changes sign, against beta*(H); control: the same bisection
    with H - 1 heads, against beta*(H)."""
    bstar = th.beta_star(H, n=n, alpha=alpha)
    how = f"spread of the sign change over {len(frames)} random orthogonal frames (bisection to 1e-13)"
    rows = []
    for key, heads, of in (("thm19_beta_star", H, ""), ("thm19_beta_star_control", H - 1, "thm19_beta_star")):
        guess = th.beta_star(heads, n=n, alpha=alpha)
        roots = [_margin_root(heads, n, alpha, f, guess) for f in frames]
        rows.append(Row(key, np.mean(roots), spread(roots, 1e-13 * guess), how,
                        prediction(key, bstar), control_of=of,
                        params={"n": n, "alpha": alpha, "H": heads, "frames": list(frames)}))
    return rows


# ------------------------------------------------------------------ Theorem 22 (early rate)
def _early_rates(lambdas, beta, n, frame):
    x = th.orthogonal_tokens(n, rng=frame)
    v = MultiHead.scalar(list(lambdas), d=n, beta=beta, kind="softmax").velocity(x)
    g = v @ x.T
    rates = (g + g.T)[np.triu_indices(n, 1)]
    return rates.mean(), spread(rates, 0.0) / np.sqrt(rates.size) + 16 * EPS * float(np.max(np.abs(rates))), rates.size


def theorem22_early_rate(lambdas=(0.5, 1.0, 3.0), beta=2.0, n=10, frame=5) -> list:
    """rho'(0) of the particles (d/dt <x_i, x_j> = <v_i, x_j> + <x_i, v_j>) against sum_h phi(lambda_h);
    control: the particles of equal heads Lambda / H (the same total strength) against the same prediction."""
    predicted = th.early_rate(list(lambdas), beta=beta, n=n)
    H, lam = len(lambdas), float(np.sum(lambdas))
    rows = []
    for key, lams, of in (("thm22_early", list(lambdas), ""), ("thm22_early_control", [lam / H] * H, "thm22_early")):
        mean, sigma, pairs = _early_rates(lams, beta, n, frame)
        rows.append(Row(key, mean, sigma, f"standard error over the {pairs} token pairs of a random orthogonal frame "
                        "(floor 16 ulp)", prediction(key, predicted), control_of=of,
                        params={"lambdas": lams, "beta": beta, "n": n, "frame": frame}))
    return rows


# ------------------------------------------------------------------ Theorem 27 (entropy)
def _entropy_run(x0, beta, lam, t1, rtol):
    model = MultiHead.scalar([lam], d=x0.shape[1], beta=beta, kind="softmax")
    ts = np.linspace(0.0, t1, 25)
    fn = lambda t, x: {"H": model.entropy(x)[0].mean(), "rho": 1 - pairwise_one_minus_cos(x).mean()}  # noqa: E731
    run = simulate(x0, model, t1=t1, method="dopri5", rtol=rtol, atol=1e-13, save=SaveAt(ts=ts, x=False, fn=fn))
    return ts, run.saved["H"], run.saved["rho"]


def theorem27_entropy(n=5, beta=3.0, lam=1.0, t1=3.0) -> list:
    """Mean attention entropy of an equiangular particle run at t1 against the closed form H(rho(t1)) at the
    run's own overlap; control: random tokens (not equiangular), where H is no function of the mean overlap."""
    rows = []
    for key, x0, of in (("thm27_entropy", th.equiangular_tokens(n, 0.0), ""),
                        ("thm27_entropy_control", sample_uniform(n, d=n, rng=np.random.default_rng(7)),
                         "thm27_entropy")):
        ts, H, rho = _entropy_run(x0, beta, lam, t1, 1e-11)
        _, H8, _ = _entropy_run(x0, beta, lam, t1, 1e-8)
        predicted = prediction(key, th.entropy_equiangular(rho[-1], n=n, beta=beta, lam=lam))
        rows.append(Row(key, H[-1], change(H[-1], H8[-1], 8 * EPS), "change of H(t1) from rtol 1e-8 to 1e-11",
                        predicted, control_of=of,
                        params={"n": n, "beta": beta, "lambda": lam, "T": t1, **({"seed": 7} if of else {})},
                        curves={"t": ts, "entropy": H}, extra={"rises": bool(np.all(np.diff(H) > 0)),
                                                               "log_n_minus_H": float(np.log(n) - H[-1])}))
    return rows


# ------------------------------------------------------------------ CLPR's critical gamma (arXiv:2510.05554)
def top_weight(q, keys, beta) -> float:
    """Softmax weight of the key with the largest score <q, k_j>, from headflow's exact log-partition log Z."""
    logz = exp_sums(beta * np.eye(q.size)[None], q[None], keys, None, summation="exact")[0].logz[0]
    return float(np.exp(beta * np.max(keys @ q) - logz))


def _gamma_cross(x, n, i):
    # token i's own score is the largest (1 > rho): its weight is the top weight
    return brentq(lambda g: top_weight(x[i], x, g * np.log(n)) - 0.5, 0.1, 10.0, xtol=1e-13)


def clpr_gamma_c(rho=0.3, ns=(10, 100, 300), control_rho=0.5) -> list:
    """gamma where the self-weight crosses 1/2 (beta = gamma log n, equiangular overlap rho) against the
    finite-n closed form log(n - 1)/log(n)/(1 - rho) -> 1/(1 - rho); control: overlap control_rho."""
    rows = []
    for key, r, of in (("clpr_gamma_c", rho, ""), ("clpr_gamma_c_control", control_rho, "clpr_gamma_c")):
        cross = []
        for n in ns:
            x = th.equiangular_tokens(n, r)
            cross.append([_gamma_cross(x, n, i) for i in (0, n // 2, n - 1)])
        cross = np.array(cross)
        finite = np.log(np.array(ns) - 1.0) / np.log(ns) / (1.0 - rho)
        rows.append(Row(key, cross[-1].mean(), spread(cross[-1], 1e-12), "spread over 3 query tokens (floor 1e-12)",
                        prediction(key, finite[-1]), control_of=of,
                        params={"rho": r, "rho_predicted": rho, "n": list(ns)},
                        curves={"n": np.array(ns, float), "gamma_cross": cross.mean(axis=1), "gamma_finite_n": finite},
                        extra={"gamma_c": 1.0 / (1.0 - rho)}))
    return rows


# ------------------------------------------------------------------ collapse from a cap (arXiv:2411.04551)
def sample_cap(n, d, radius, rng) -> np.ndarray:
    """n i.i.d. uniform points of the cap {x : angle(x, e_d) <= radius} of S^{d-1} (rejection)."""
    out = np.empty((0, d))
    while len(out) < n:
        x = sample_uniform(4 * n, d=d, rng=rng)
        out = np.vstack([out, x[x[:, -1] >= np.cos(radius)]])
    return out[:n]


def cap_diameter(x) -> np.ndarray:
    """Largest pairwise geodesic distance, 2 atan2(|x_i - x_j|, |x_i + x_j|) (accurate at tiny angles)."""
    i, j = np.triu_indices(x.shape[-2], 1)
    a, b = x[..., i, :], x[..., j, :]
    return (2 * np.arctan2(np.linalg.norm(a - b, axis=-1), np.linalg.norm(a + b, axis=-1))).max(axis=-1)


def _cap_run(x0, kind, beta, t1, eps):
    d = x0.shape[1]
    ts = np.linspace(0.0, t1, int(8 * t1) + 1)
    run = simulate(x0, MultiHead(np.eye(d), beta=beta, kind=kind), t1=t1, method="dopri5", rtol=1e-11,
                   atol=1e-13, save=SaveAt(ts=ts, x=False, fn=lambda t, x: {"diam": cap_diameter(x)}))
    diam = run.saved["diam"]
    # log-linear interpolation of the first crossing of each eps (the diameter never widens: checked below)
    t_eps = np.array([np.interp(-np.log(e), -np.log(diam), ts) for e in eps])
    return ts, diam, t_eps


def grr_cap(n=60, d=4, beta=4.0, radius=0.4 * np.pi, t1=60.0, seed=0, eps=(1e-2, 1e-3, 1e-4, 1e-5, 1e-6)) -> list:
    """Softmax, Q = K = V = I from a cap: the slope of t(eps) against log(1/eps) is 1/rate = 1 (the
    linearisation at the collapsed state); control: USA heads, whose collapse rate is e^beta."""
    x0 = sample_cap(n, d, radius, np.random.default_rng(seed))
    logs = np.log(1 / np.array(eps))
    rows = []
    for key, kind, of in (("grr_cap", "softmax", ""), ("grr_cap_control", "usa", "grr_cap")):
        ts, diam, t_eps = _cap_run(x0, kind, beta, t1, eps)
        slope = np.polyfit(logs, t_eps, 1)[0]
        half = len(eps) // 2
        drift = np.polyfit(logs[: half + 1], t_eps[: half + 1], 1)[0] - np.polyfit(logs[half:], t_eps[half:], 1)[0]
        t05 = float(np.interp(-np.log(0.05), -np.log(diam), ts))
        rows.append(Row(key, slope, change(drift, 0.0, 1e-9), "drift of the slope between the first and last "
                        "halves of the eps range", prediction(key, 1.0), control_of=of,
                        params={"n": n, "d": d, "beta": beta, "radius_over_pi": radius / np.pi, "T": t1,
                                "seed": seed, "kind": kind},
                        curves={"t": ts, "diameter": diam} if not of else {},
                        extra={"diameter_at_T": float(diam[-1]), "t_at_0.05": t05,
                               "never_widens": bool(np.all(np.diff(diam) <= 1e-12))}))
    return rows
