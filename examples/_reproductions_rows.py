"""Measurements behind docs/reproductions.md: one function per published statement.

Each function runs headflow at the sizes it is given (the example's full sizes, or the quick sizes
of tests/reproductions) and returns a :class:`Row`: the measured number, its uncertainty, the
published value it is compared with, and the curves the example plots. The verdict is computed,
never typed in. examples/reproductions.py runs them all and writes the table, dataset and figure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import brentq

from particles import MultiHead, SaveAt, diagnose, field_jacobian, sample_uniform, simulate
from particles import theory as th
from particles.summation import exp_sums


@dataclass
class Row:
    """One reproduced statement: ``measured`` +- ``uncertainty`` against ``target``."""

    key: str
    measured: float
    uncertainty: float
    target: float
    agrees: bool
    curves: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)


def _row(key, measured, uncertainty, target, agrees=None, **kw) -> Row:
    if agrees is None:
        agrees = abs(measured - target) <= uncertainty
    return Row(key, float(measured), float(uncertainty), float(target), bool(agrees), **kw)


def pairwise_one_minus_cos(x) -> np.ndarray:
    """1 - <u_i, u_j> of the directions u = x/|x|, i < j, as |u_i - u_j|^2 / 2 (no cancellation)."""
    u = x / np.linalg.norm(x, axis=-1, keepdims=True)
    i, j = np.triu_indices(x.shape[-2], 1)
    return 0.5 * np.sum((u[..., i, :] - u[..., j, :]) ** 2, axis=-1)


# ------------------------------------------------------------------ arXiv:2605.04279 closed forms
def theorem19_cosine(n=20, alpha=0.8) -> Row:
    """cos angle(f_i, x_i) measured at beta*(H = 2) equals c*(2) = 1/golden ratio (orthogonal tokens)."""
    bstar = th.beta_star(2, n, alpha)
    diag = diagnose(MultiHead.scalar([alpha, alpha], d=n, beta=bstar, kind="softmax"), th.orthogonal_tokens(n, rng=3))
    cos = diag["cos_angle"]
    golden = (1 + np.sqrt(5)) / 2
    return _row("thm19_golden", 1.0 / float(np.mean(cos)), max(float(np.ptp(1 / cos)), 1e-12), golden)


def theorem19_beta_star(H=3, n=20, alpha=0.8) -> Row:
    """The beta where the radial-dominance margin of the particles changes sign, against beta*."""
    x = th.orthogonal_tokens(n, rng=3)

    def margin(b):
        return float(diagnose(MultiHead.scalar([alpha] * H, d=n, beta=b, kind="usa"), x)["rd_margin_min"].min())

    bstar = th.beta_star(H, n, alpha)
    found = brentq(margin, 0.5 * bstar, 1.5 * bstar, xtol=1e-13, rtol=1e-13)
    return _row("thm19_beta_star", found, 1e-9 * bstar, bstar)


def theorem22_early_rate(lambdas=(0.5, 1.0, 3.0), beta=2.0, n=10) -> Row:
    """rho'(0) of the particles (d/dt <x_i, x_j> = <v_i, x_j> + <x_i, v_j>) against sum_h phi(lambda_h)."""
    x = th.orthogonal_tokens(n)
    v = MultiHead.scalar(list(lambdas), d=n, beta=beta, kind="softmax").velocity(x)
    g = v @ x.T
    rate = float(np.mean((g + g.T)[np.triu_indices(n, 1)]))
    return _row("thm22_early", rate, 1e-12, th.early_rate(list(lambdas), beta, n))


def theorem22_late_rate(lambdas=(0.6, 0.4), beta=1.0, n=4, t=(6.0, 9.0)) -> Row:
    """Slope of -log(1 - rho) of a particle run (orthogonal start) against 2 Lambda."""
    model = MultiHead.scalar(list(lambdas), d=n, beta=beta, kind="softmax")
    ts = np.linspace(t[0], t[1], 9)
    run = simulate(th.orthogonal_tokens(n), model, t1=t[1], method="dopri5", rtol=1e-10, atol=1e-13,
                   save=SaveAt(ts=np.r_[0.0, ts]))
    gap = pairwise_one_minus_cos(run.x[1:]).mean(axis=1)
    slope = -np.polyfit(ts, np.log(gap), 1)[0]
    return _row("thm22_late", slope, 2e-3 * th.late_rate(list(lambdas)), th.late_rate(list(lambdas)),
                curves={"t": ts, "one_minus_rho": gap})


def _hitting_time_particles(model, rho0, rho1, n, t1):
    """First time the particles' mean overlap reaches rho1 from equiangular rho0 (dopri5, saved at every
    accepted step, linear interpolation between the two steps around the crossing)."""
    run = simulate(th.equiangular_tokens(n, rho0), model, t1=t1, method="dopri5", rtol=1e-10, atol=1e-12,
                   save=SaveAt(every=1, t0=True, x=False,
                               fn=lambda t, x: {"rho": 1 - pairwise_one_minus_cos(x).mean()}))
    ts, rho = run.t, run.saved["rho"]
    k = int(np.argmax(rho >= rho1))
    return ts[k - 1] + (rho1 - rho[k - 1]) * (ts[k] - ts[k - 1]) / (rho[k] - rho[k - 1])


def theorem25_relu(n=6, beta=1.0, rho0s=(1e-2, 1e-3), rho1=0.5) -> Row:
    """ReLU particles: each decade of rho0 costs n ln 10 / (2 beta sum lambda^2) (Theorem 25, O(n log d))."""
    relu = MultiHead.scalar([1.0], d=n, beta=beta, kind="relu")
    soft = MultiHead.scalar([1.0], d=n, beta=beta, kind="softmax")
    t1 = n * np.log(1 / min(rho0s)) / beta + 5.0  # twice the linearised time: the crossing is inside
    T = [_hitting_time_particles(relu, r, rho1, n, t1) for r in rho0s]
    Ts = [_hitting_time_particles(soft, r, rho1, n, t1) for r in rho0s]
    expected = n * np.log(rho0s[0] / rho0s[1]) / (2 * beta)
    # the linearisation is exact only as rho0 -> 0: allow its O(rho0) correction and the save spacing
    return _row("thm25_relu", T[1] - T[0], 0.02 * expected, expected,
                extra={"softmax_increment": Ts[1] - Ts[0]})


def theorem27_entropy(n=5, beta=3.0, lam=1.0, t1=12.0) -> Row:
    """Attention entropy of an equiangular particle run at t1 against its limit log n."""
    model = MultiHead.scalar([lam], d=n, beta=beta, kind="softmax")
    ts = np.linspace(0.0, t1, 25)
    run = simulate(th.equiangular_tokens(n, 0.0), model, t1=t1, method="dopri5", rtol=1e-11, atol=1e-13,
                   save=SaveAt(ts=ts, x=False, fn=lambda t, x: {"H": model.entropy(x)[0].mean()}))
    H = run.saved["H"]
    ok = bool(np.all(np.diff(H) > 0)) and abs(H[-1] - np.log(n)) < 1e-5  # a monotone rise to log n
    return _row("thm27_entropy", H[-1], 1e-5, np.log(n), agrees=ok, curves={"t": ts, "entropy": H})


# ------------------------------------------------------------------ Polyanskiy-Rigollet-Yao (arXiv:2507.22857)
def circle_kernel_model(beta: float) -> MultiHead:
    r"""USA head on S^1 with kernel e^{beta <x, y>} and value I for any real beta.

    headflow's beta is >= 0; a negative inverse temperature is the score matrix M = -I at |beta|
    with the value W = I kept: :math:`e^{|\beta|\langle x,-y\rangle} = e^{\beta\langle x,y\rangle}`,
    so :math:`\dot\theta_i = \frac1n\sum_j e^{\beta\cos(\theta_i-\theta_j)}\sin(\theta_j-\theta_i)`.
    """
    sign = 1.0 if beta >= 0 else -1.0
    return MultiHead(sign * np.eye(2)[None], np.eye(2)[None], beta=abs(beta), kind="usa")


def circle_diameter(x) -> np.ndarray:
    """Length of the shortest arc holding every token: 2 pi minus the largest angular gap."""
    th_ = np.sort(np.arctan2(x[..., 1], x[..., 0]), axis=-1)
    gaps = np.diff(np.concatenate([th_, th_[..., :1] + 2 * np.pi], axis=-1), axis=-1)
    return 2 * np.pi - gaps.max(axis=-1)


def three_clusters(k: int, jitter: float = 0.0, rng=None) -> np.ndarray:
    """3 clusters of k tokens at 120 degrees (angles jittered by N(0, jitter^2))."""
    ang = np.repeat([0.0, 2 * np.pi / 3, 4 * np.pi / 3], k)
    if jitter:
        ang = ang + jitter * np.random.default_rng(rng).standard_normal(ang.size)
    return np.c_[np.cos(ang), np.sin(ang)]


def _three_cluster_growth(beta, k):
    """Largest growth rate of the field's Jacobian at the 3-cluster state, the rotation mode removed."""
    ev = np.sort(np.linalg.eigvals(field_jacobian(circle_kernel_model(beta), three_clusters(k))[0]).real)
    return ev[-2] if abs(ev[-1]) < 1e-6 else ev[-1]


def pry_threshold(k=2) -> Row:
    """beta where the equal 3-cluster state turns linearly stable (stable non-synchronised state) vs -2/3."""
    found = brentq(lambda b: _three_cluster_growth(b, k), -0.9, -0.5, xtol=1e-10)
    betas = np.linspace(-1.2, -0.2, 21)
    return _row("pry_nonsync_threshold", found, 1e-6, -2.0 / 3.0,
                curves={"beta": betas, "growth": np.array([_three_cluster_growth(b, k) for b in betas])})


def pry_sync(betas=(-0.16,), n=16, seeds=3, t1=150.0, tol=1e-3) -> Row:
    """Fraction of uniform random starts whose circle diameter is below tol at t1 (all betas, all seeds)."""
    synced = np.zeros((len(betas), seeds))
    for b, beta in enumerate(betas):
        for s in range(seeds):
            x0 = sample_uniform(n, 2, np.random.default_rng(1000 + s))
            x1 = simulate(x0, circle_kernel_model(beta), t1=t1, method="dopri5", rtol=1e-8).x[-1]
            synced[b, s] = circle_diameter(x1) < tol
    frac = float(synced.mean())
    extra = {"betas": list(betas), "per_beta": synced.mean(axis=1).tolist(), "runs": int(synced.size)}
    return _row("pry_sync", frac, 0.0, 1.0, extra=extra)


def pry_basin(betas=(-1.0, -0.5), k=4, seeds=3, jitter=0.05, t1=200.0) -> Row:
    """From the 3-cluster state jittered by `jitter` rad: fraction still unsynchronised at t1, per beta."""
    stays = np.zeros((len(betas), seeds))
    for b, beta in enumerate(betas):
        for s in range(seeds):
            x0 = three_clusters(k, jitter, s)
            x1 = simulate(x0, circle_kernel_model(beta), t1=t1, method="dopri5", rtol=1e-8).x[-1]
            stays[b, s] = circle_diameter(x1) > 1.0
    per = stays.mean(axis=1)
    ok = bool(np.all(per[np.array(betas) < -2 / 3] == 1) and np.all(per[np.array(betas) > -2 / 3] == 0))
    return _row("pry_basin", per[0], 0.0, 1.0, agrees=ok, extra={"betas": list(betas), "stays": per.tolist()})


# ------------------------------------------------------------------ Chen-Lin-Polyanskiy-Rigollet (arXiv:2510.05554)
def top_weight(q, keys, beta) -> float:
    """Softmax weight of the key with the largest score <q, k_j>, from headflow's exact log-partition log Z."""
    logz = exp_sums(beta * np.eye(q.size)[None], q[None], keys, None, summation="exact")[0].logz[0]
    return float(np.exp(beta * np.max(keys @ q) - logz))


def clpr_gamma_c(rho=0.3, ns=(10, 100, 300)) -> Row:
    """gamma where the self-weight crosses 1/2 (beta = gamma log n, equiangular overlap rho), against 1/(1-rho)."""
    crossing = []
    for n in ns:
        x = th.equiangular_tokens(n, rho)
        # token 1's own score is the largest (1 > rho): its weight is the top weight
        crossing.append(brentq(lambda g, x=x, n=n: top_weight(x[0], x, g * np.log(n)) - 0.5, 0.1, 10.0, xtol=1e-12))
    crossing = np.array(crossing)
    target = 1.0 / (1.0 - rho)
    # finite n: (n - 1) n^{-gamma (1 - rho)} = 1 puts the crossing at log(n - 1)/log(n) / (1 - rho)
    finite = np.log(np.array(ns) - 1.0) / np.log(ns) * target
    return _row("clpr_gamma_c", crossing[-1], target - finite[-1] + 1e-9, target,
                curves={"n": np.array(ns, float), "gamma_cross": crossing, "gamma_finite_n": finite})


# ------------------------------------------------------------------ long-context scaling (arXiv:2605.08505)
def long_context(d=3, ns=(1000, 10000), draws=12, seed=0, level=0.5) -> Row:
    """Median over draws of the beta at which the top key's weight reaches `level` (fixed query, n
    uniform keys on S^{d-1}); the slope of its log against log n, against 2/(d-1). The uncertainty is
    twice the bootstrap standard error of the slope."""
    rng = np.random.default_rng(seed)
    q = np.zeros(d)
    q[-1] = 1.0
    betas = np.empty((len(ns), draws))
    for a, n in enumerate(ns):
        for r in range(draws):
            keys = sample_uniform(n, d, rng)
            betas[a, r] = np.exp(brentq(lambda lb, k=keys: top_weight(q, k, np.exp(lb)) - level, -5.0, 40.0,
                                        xtol=1e-10))
    logn = np.log(ns)
    slope = np.polyfit(logn, np.log(np.median(betas, axis=1)), 1)[0]
    boot = [np.polyfit(logn, np.log(np.median(betas[:, rng.integers(0, draws, draws)], axis=1)), 1)[0]
            for _ in range(200)]
    unc = 2 * float(np.std(boot))
    return _row(f"long_context_d{d}", slope, unc, 2.0 / (d - 1),
                curves={"n": np.array(ns, float), "beta_star": np.median(betas, axis=1)})


# ------------------------------------------------------------------ measure-to-measure interpolation (arXiv:2411.04551)
def sample_cap(n, d, radius, rng) -> np.ndarray:
    """n i.i.d. uniform points of the cap {x : angle(x, e_d) <= radius} of S^{d-1} (rejection)."""
    out = np.empty((0, d))
    while len(out) < n:
        x = sample_uniform(4 * n, d, rng)
        out = np.vstack([out, x[x[:, -1] >= np.cos(radius)]])
    return out[:n]


def cap_diameter(x) -> np.ndarray:
    """Largest pairwise geodesic distance, 2 atan2(|x_i - x_j|, |x_i + x_j|) (accurate at tiny angles)."""
    i, j = np.triu_indices(x.shape[-2], 1)
    a, b = x[..., i, :], x[..., j, :]
    return (2 * np.arctan2(np.linalg.norm(a - b, axis=-1), np.linalg.norm(a + b, axis=-1))).max(axis=-1)


def grr_cap(n=60, d=4, beta=4.0, radius=0.4 * np.pi, t1=60.0, seed=0, eps=(1e-2, 1e-3, 1e-4, 1e-5, 1e-6)) -> Row:
    """Softmax, Q = K = V = I: diameter at t1 (against 0.05) and the times t(eps) to reach each eps."""
    x0 = sample_cap(n, d, radius, np.random.default_rng(seed))
    ts = np.linspace(0.0, t1, int(8 * t1) + 1)
    run = simulate(x0, MultiHead(np.eye(d), beta=beta, kind="softmax"), t1=t1, method="dopri5", rtol=1e-11,
                   atol=1e-13, save=SaveAt(ts=ts, x=False, fn=lambda t, x: {"diam": cap_diameter(x)}))
    diam = run.saved["diam"]
    # log-linear interpolation of the first crossing of each eps
    t_eps = np.array([np.interp(-np.log(e), -np.log(diam), ts) for e in eps])
    fit = np.polyfit(np.log(1 / np.array(eps)), t_eps, 1)
    resid = float(np.max(np.abs(np.polyval(fit, np.log(1 / np.array(eps))) - t_eps)))
    t05 = float(np.interp(-np.log(0.05), -np.log(diam), ts))
    ok = bool(diam[-1] < 0.05 and np.all(np.diff(diam) <= 1e-12))  # below 0.05, never widening (cap lemma)
    return _row("grr_cap", diam[-1], 0.0, 0.05, agrees=ok,
                curves={"t": ts, "diameter": diam, "eps": np.array(eps), "t_eps": t_eps},
                extra={"slope": float(fit[0]), "max_residual": resid, "t_at_0.05": t05})


# ------------------------------------------------------------------ Post-LN vs Pre-LN (arXiv:2512.01868)
def norm_rates(n=4, beta=1.0, t_post=(6.0, 10.0), t_pre=(200.0, 2000.0)) -> tuple[Row, Row]:
    """1 - rho of orthogonal tokens, one softmax head M = W = I: exponential rate on the sphere (Post-LN),
    power of t in flat space with attention on the normalised tokens (Pre-LN)."""
    x0 = th.orthogonal_tokens(n)
    rows = []
    for key, model, (a, b), logt, target in (
        ("post_ln_rate", MultiHead(np.eye(n), beta=beta, kind="softmax"), t_post, False, -2.0),
        ("pre_ln_power", MultiHead(np.eye(n), beta=beta, kind="softmax", geometry="flat", update="pre_ln"), t_pre,
         True, -2.0),
    ):
        ts = np.geomspace(a, b, 12) if logt else np.linspace(a, b, 12)
        run = simulate(x0, model, t1=b, method="dopri5", rtol=1e-11, atol=1e-13, save=SaveAt(ts=np.r_[0.0, ts]))
        gap = pairwise_one_minus_cos(run.x[1:]).mean(axis=1)
        slope, _ = np.polyfit(np.log(ts) if logt else ts, np.log(gap), 1)
        rows.append(_row(key, slope, 0.05, target, curves={"t": ts, "one_minus_rho": gap}))
    return tuple(rows)


# ------------------------------------------------------------------ Karagodin-Polyanskiy-Rigollet (arXiv:2411.04990)
def renyi_centres(x, delta) -> list[int]:
    """Greedy Renyi centres in token order: token k is one when it is farther than delta from every earlier centre."""
    centres: list[int] = []
    cos_d = np.cos(delta)
    for k in range(len(x)):
        if not centres or np.max(x[centres] @ x[k]) < cos_d:
            centres.append(k)
    return centres


def kpr_causal(n=200, beta=64.0, seeds=1, ts=(0.0, 25.0, 50.0, 75.0, 100.0, 150.0), rtol=1e-6) -> Row:
    """Causal softmax, Q = K = V = I_2: Renyi centres (delta = 4 beta^{-1/2}) along the run; the number lost
    between t = 75 and t = 150, averaged over seeds."""
    delta = 4.0 / np.sqrt(beta)
    model = MultiHead(np.eye(2), beta=beta, kind="softmax", causal=True)
    counts = np.zeros((seeds, len(ts)), dtype=int)
    for s in range(seeds):
        x0 = sample_uniform(n, 2, np.random.default_rng(s))
        run = simulate(x0, model, t1=ts[-1], method="dopri5", rtol=rtol, atol=1e-8, save=SaveAt(ts=np.array(ts)))
        counts[s] = [len(renyi_centres(x, delta)) for x in run.x]
    i75, i150 = ts.index(75.0), ts.index(150.0)
    lost = counts[:, i75] - counts[:, i150]
    se = float(np.std(lost, ddof=1) / np.sqrt(seeds)) if seeds > 1 else float("nan")
    ok = bool(np.all(counts[:, i75] >= 3) and np.mean(lost) > 0) if seeds > 1 else bool(counts[0, i75] >= 3)
    extra = {"fraction_losing": float(np.mean(lost >= 1)), "centres_at_75": float(np.mean(counts[:, i75]))}
    return _row("kpr_causal", float(np.mean(lost)), se, 1.0, agrees=ok, curves={"t": np.array(ts), "centres": counts},
                extra=extra)
