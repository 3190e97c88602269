"""docs/theory.md §4–§5 closed forms against particle simulations (§7 items 3–6)."""

import numpy as np
import pytest

from particles import MultiHead, SaveAt, diagnose, sample_uniform, simulate
from particles import theory as th
from tests.helpers import random_symmetric

KINDS = ["softmax", "usa", "relu", "relu_rownorm"]


def rho_of(x):
    G = x @ x.T
    return G[np.triu_indices(len(x), 1)]


@pytest.mark.parametrize("kind", KINDS)
def test_equiangular_ode_matches_particles(kind):
    n, lambdas, beta = 5, [1.0, 0.6], 1.5
    rho0 = 0.1
    x0 = th.equiangular_tokens(n, rho0)
    model = MultiHead.scalar(lambdas, d=n, beta=beta, kind=kind)
    ts = np.linspace(0, 2.0, 9)
    traj = simulate(x0, model, t1=2.0, dt=1e-3, method="rk4", save=SaveAt(ts=ts))
    rho_particles = np.array([rho_of(x) for x in traj.x])
    assert np.ptp(rho_particles, axis=1).max() < 1e-12  # stays equiangular
    rho_ode = th.solve_equiangular(rho0, ts, lambdas=lambdas, beta=beta, n=n, kind=kind)
    np.testing.assert_allclose(rho_particles[:, 0], rho_ode, atol=1e-9)
    assert rho_ode[-1] > rho0


def test_beta0_closed_form_and_hitting_time():
    n, lambdas = 4, [0.7, 0.5]
    Lam = sum(lambdas)
    x0 = th.orthogonal_tokens(n)
    model = MultiHead.scalar(lambdas, d=n, beta=0.0, kind="softmax")
    r = 0.8
    T = float(th.time_to_rho_beta0(r, Lambda=Lam, n=n))
    ts = np.linspace(0, T, 6)
    traj = simulate(x0, model, t1=T, dt=1e-3, save=SaveAt(ts=ts))
    np.testing.assert_allclose([rho_of(x).mean() for x in traj.x], th.rho_beta0(ts, Lambda=Lam, n=n), atol=1e-10)
    assert rho_of(traj.x[-1]).mean() == pytest.approx(r, abs=1e-10)
    assert th.hitting_time(0.0, r, lambdas=lambdas, beta=0.0, n=n) == pytest.approx(T, rel=1e-9)


@pytest.mark.parametrize("H", [2, 3, 5])
@pytest.mark.parametrize("kind", ["usa", "softmax"])
def test_critical_beta_cosine_and_radial_dominance(H, kind):
    n, alpha = 20, 0.8  # β* > 0 needs (n − 1)c*² > 1 − c*², i.e. n ≥ 19 at H = 5
    bstar = th.beta_star(H, n=n, alpha=alpha)
    assert bstar > 0
    x = th.orthogonal_tokens(n, rng=3)
    cos_at, margins = None, {}
    for b in (0.9 * bstar, bstar, 1.1 * bstar):
        diag = diagnose(MultiHead.scalar([alpha] * H, d=n, beta=b, kind=kind), x)
        margins[b] = diag["rd_margin_min"].min()
        if b == bstar:
            cos_at = diag["cos_angle"]
    np.testing.assert_allclose(cos_at, th.c_star(H), atol=1e-12)
    vals = list(margins.values())
    assert vals[0] > 0 and abs(vals[1]) < 1e-9 * max(abs(vals[0]), 1) and vals[2] < 0


def test_golden_ratio():
    assert th.c_star(2) == pytest.approx(2 / (1 + np.sqrt(5)), abs=1e-15)
    c = th.c_star(7)
    assert c * c + 6 * c == pytest.approx(1.0, abs=1e-14)


def test_entropy_identity_by_finite_differences(rng):
    """Theorem 27: dH_i/dt = −β² Cov_{p_i}(s_ij, ṡ_ij) along any trajectory (generic data)."""
    n, d = 7, 3
    M = random_symmetric(rng, 1, d)
    model = MultiHead(M, rng.standard_normal((1, d, d)), beta=1.3, kind="usa")  # no C3/C4 needed
    x = sample_uniform(n, d=d, rng=rng)
    xdot = model.velocity(x)
    s = x @ M[0] @ x.T
    sdot = xdot @ M[0] @ x.T + x @ M[0] @ xdot.T
    p = np.exp(model.beta * s)
    p /= p.sum(1, keepdims=True)
    cov = (p * s * sdot).sum(1) - (p * s).sum(1) * (p * sdot).sum(1)
    predicted = -model.beta**2 * cov
    ent = lambda y: MultiHead(M, beta=model.beta, kind="softmax").entropy(y)[0]  # noqa: E731
    h = 1e-4
    kw = dict(method="dopri5", rtol=1e-13, atol=1e-15, dt=h / 4)
    fwd = simulate(x, model, t1=h, **kw).x[-1]
    bwd = simulate(x, MultiHead(M, -model.W, beta=model.beta, kind="usa"), t1=h, **kw).x[-1]
    np.testing.assert_allclose((ent(fwd) - ent(bwd)) / (2 * h), predicted, rtol=1e-6, atol=1e-9)


def test_equiangular_entropy_closed_form_rises_to_log_n():
    n, lam, beta = 5, 1.0, 3.0
    x0 = th.equiangular_tokens(n, 0.0)
    model = MultiHead.scalar([lam], d=n, beta=beta, kind="softmax")
    ts = np.linspace(0, 12, 13)
    traj = simulate(x0, model, t1=12, dt=5e-3, save=SaveAt(ts=ts, fn=lambda t, x: {"H": model.entropy(x)[0]}))
    H = traj.saved["H"]
    rho = np.array([rho_of(x).mean() for x in traj.x])
    np.testing.assert_allclose(H, th.entropy_equiangular(rho, n=n, beta=beta, lam=lam)[:, None] * np.ones(n),
                               atol=1e-10)
    assert np.all(np.diff(H[:, 0]) > 0)  # monotone in the equiangular case only
    assert H[-1, 0] == pytest.approx(np.log(n), abs=1e-6)


def test_phi_maximiser_and_inflection():
    beta, n = 2.0, 10
    lm, lc = th.lambda_max(beta, n=n), th.lambda_c(beta, n=n)
    grid = np.linspace(0.01, 5, 200001)
    assert grid[np.argmax(th.phi(grid, beta=beta, n=n))] == pytest.approx(lm, abs=1e-4)
    second = np.gradient(np.gradient(th.phi(grid, beta=beta, n=n), grid), grid)
    sign_change = grid[np.flatnonzero(np.diff(np.sign(second[100:-100])))[0] + 100]
    assert sign_change == pytest.approx(lc, abs=1e-3)
    assert lc > lm


def test_superadditivity_in_convex_regime():
    beta, n = 1.0, 10
    lc = th.lambda_c(beta, n=n)
    Lam, H = 4 * lc, 2
    even = H * th.phi(Lam / H, beta=beta, n=n)
    spread = th.phi(Lam / H - 0.5, beta=beta, n=n) + th.phi(Lam / H + 0.5, beta=beta, n=n)
    assert spread > even


def test_hitting_times_superadditive():
    """1/T_multi ≥ Σ_h 1/T_h (strict for unequal heads), softmax, equiangular."""
    n, beta = 8, 1.0
    lambdas = [0.5, 2.0]
    T_multi = th.hitting_time(0.0, 0.5, lambdas=lambdas, beta=beta, n=n)
    T_each = [th.hitting_time(0.0, 0.5, lambdas=[lam], beta=beta, n=n) for lam in lambdas]
    assert 1 / T_multi > sum(1 / T for T in T_each)


def test_relu_time_grows_with_log_inverse_rho0_softmax_bounded():
    n, beta, lambdas = 6, 1.0, [1.0]
    rho1 = 0.5
    for kind in ("relu", "softmax"):
        T = [th.hitting_time(r0, rho1, lambdas=lambdas, beta=beta, n=n, kind=kind) for r0 in (1e-4, 1e-6, 1e-8)]
        increments = np.diff(T)
        if kind == "relu":
            # T_ReLU ≈ n log(1/ρ0)/(2βΣλ²) + O(1): each factor 100 adds n ln(100)/(2βΣλ²)
            expected = n * np.log(100) / (2 * beta)
            np.testing.assert_allclose(increments, expected, rtol=1e-3)
        else:
            # ρ̇(0) > 0: starting 10⁴ times closer to 0 costs only ~ρ0/ρ̇(0)
            assert np.all(increments < 1e-3) and T[-1] < 2 * th.softmax_time_linear(lambdas, beta=beta, n=n)


def test_late_rate():
    n, lambdas, beta = 4, [0.6, 0.4], 1.0
    ts = np.array([0, 8.0, 10.0])
    rho = th.solve_equiangular(0.0, ts, lambdas=lambdas, beta=beta, n=n)
    rate = -np.log((1 - rho[2]) / (1 - rho[1])) / 2.0
    assert rate == pytest.approx(th.late_rate(lambdas), rel=1e-3)
