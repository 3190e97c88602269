"""Linearised breakdown theory (metrics.horizon): initial law, exact linear growth, detection, the law of t_delta."""

import numpy as np
import pytest
from scipy import stats

import meanfield as mf
from metrics import (
    ResolutionWarning,
    breakdown_law_cdf,
    breakdown_law_mean,
    breakdown_time,
    fit_horizon_slope,
    harmonic_amplitudes,
    predicted_breakdown_time,
)
from particles import InvalidParameterError, MultiHead, SaveAt, simulate


def _circle(theta):
    return np.stack([np.cos(theta), np.sin(theta)], axis=1)


def _uniform_sphere(rng, n):
    y = rng.standard_normal((n, 3))
    return y / np.linalg.norm(y, axis=1, keepdims=True)


def test_amplitudes_are_fourier_and_harmonic_norms(rng):
    theta = rng.uniform(0, 2 * np.pi, 50)
    A = harmonic_amplitudes(_circle(theta), 3)  # index = degree, l = 0..3
    assert A.shape == (4,) and A[0] == 1.0
    assert np.allclose(A[1:], [np.sqrt(2) * abs(np.exp(1j * l * theta).mean()) for l in (1, 2, 3)], rtol=1e-13)
    # S^2, degree 1: the real basis is sqrt(3) x, so A_1 = sqrt(3) |mean x|; rotation invariant
    x = _uniform_sphere(rng, 40)
    A = harmonic_amplitudes(x, 3)
    assert np.isclose(A[0], 1.0, rtol=1e-13)
    assert np.isclose(A[1], np.sqrt(3) * np.linalg.norm(x.mean(axis=0)), rtol=1e-12)
    R = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    assert np.allclose(harmonic_amplitudes(x @ R.T, 3), A, rtol=1e-10)
    # addition theorem: A_l^2 = (2l+1)/n^2 sum_ij P_l(<x_i, x_j>)
    from scipy.special import eval_legendre
    G = x @ x.T
    for l in (2, 3):
        assert np.isclose(A[l] ** 2, (2 * l + 1) * eval_legendre(l, G).mean(), rtol=1e-10)


@pytest.mark.parametrize("d, l, k", [(2, 1, 2), (2, 3, 2), (3, 1, 3), (3, 2, 5)])
def test_initial_amplitudes_follow_chi_law(d, l, k):
    """sqrt(n) A_l(mu_n(0)) -> chi_k (Rayleigh on S^1): KS over 300 samples of n = 400 uniform tokens."""
    rng = np.random.default_rng(7)
    n = 400
    draws = [_circle(rng.uniform(0, 2 * np.pi, n)) if d == 2 else _uniform_sphere(rng, n) for _ in range(300)]
    R = np.array([np.sqrt(n) * harmonic_amplitudes(x, l)[l] for x in draws])
    assert stats.kstest(R, stats.chi(k).cdf).pvalue > 0.01
    # the test can fail: the wrong multiplicity is rejected
    assert stats.kstest(R, stats.chi(k + 2).cdf).pvalue < 0.01


def test_detection_on_exponentials_and_edges():
    t = np.linspace(0, 8, 161)
    g = np.array([1e-3 * np.exp(0.7 * t), 1e-2 * np.exp(0.4 * t), 0.5 + 0 * t, 1e-6 + 0 * t])
    out = breakdown_time(t, g, [0.05, 0.2])
    assert out.shape == (2, 4)
    assert np.allclose(out[:, 0], np.log(np.array([0.05, 0.2]) / 1e-3) / 0.7, rtol=1e-12)
    assert np.allclose(out[:, 1], np.log(np.array([0.05, 0.2]) / 1e-2) / 0.4, rtol=1e-12)
    assert np.all(out[:, 2] == 0.0) and np.all(np.isinf(out[:, 3]))


def test_detection_warns_on_coarse_grid_and_rejects_bad_delta():
    t = np.linspace(0, 8, 5)
    with pytest.warns(ResolutionWarning, match="too coarse to resolve t_delta.*n_saves"):
        breakdown_time(t, 1e-3 * np.exp(t), 0.1)
    for bad in (0.0, -0.1, np.nan, [0.1, 0.0]):
        with pytest.raises(InvalidParameterError, match="'delta' parameter of breakdown_time must be a positive"):
            breakdown_time(t, np.exp(t), bad)
    with pytest.raises(InvalidParameterError, match="'delta' parameter of predicted_breakdown_time"):
        predicted_breakdown_time(0.01, 0.5, 0.0)
    with pytest.raises(InvalidParameterError, match="values of breakdown_time must be finite"):
        breakdown_time(t, np.full(5, np.nan), 0.1)


def _linearised_runs(rng, n, n_runs, sigma, t):
    """Exact linearised S^1 flow of the empirical Fourier coefficients: a_l(t) = a_l(0) e^{sigma_l t}."""
    A0 = np.array([harmonic_amplitudes(_circle(rng.uniform(0, 2 * np.pi, n)), 1)[1] for _ in range(n_runs)])
    return A0, A0[:, None] * np.exp(sigma * t)[None, :]


def test_linearised_flow_predicted_time_law_and_slope():
    model = MultiHead.scalar([1.0], d=2, beta=0.5, kind="softmax")
    sigma = float(mf.growth_rates(model, l_max=4)[1])
    rng = np.random.default_rng(3)
    t = np.linspace(0, 30, 1201)
    delta = 1.0  # the linearised flow has no saturation: any threshold above every A(0) works
    n_values = np.array([100, 1000, 10000])
    td = []
    for n in n_values:
        A0, A = _linearised_runs(rng, int(n), 150, sigma, t)
        got = breakdown_time(t, A, delta)
        assert np.allclose(got, predicted_breakdown_time(A0, sigma, delta), rtol=1e-10)  # exact for e^{sigma t}
        td.append(got)
    td = np.array(td)
    # closed-form law of Z = sigma t_delta - log(n)/2 - log(delta) over 450 runs
    Z = (sigma * td - 0.5 * np.log(n_values)[:, None] - np.log(delta)).ravel()
    assert stats.kstest(Z, lambda z: breakdown_law_cdf(z, k=2)).pvalue > 0.01
    assert stats.kstest(Z + 0.5, lambda z: breakdown_law_cdf(z, k=2)).pvalue < 0.01  # a shifted law is rejected
    assert abs(Z.mean() - breakdown_law_mean(2)) < 4 * (np.pi / np.sqrt(24)) / np.sqrt(Z.size)
    s, lo, hi = fit_horizon_slope(n_values, td, n_boot=500)
    assert lo < 1 / (2 * sigma) < hi and (hi - lo) < 0.3 / (2 * sigma)


def test_law_matches_chi_sampling():
    rng = np.random.default_rng(11)
    for k in (2, 5):
        Z = -np.log(stats.chi(k).rvs(size=4000, random_state=rng))
        assert stats.kstest(Z, lambda z, k=k: breakdown_law_cdf(z, k=k)).pvalue > 0.01
        assert abs(Z.mean() - breakdown_law_mean(k)) < 4 * Z.std() / np.sqrt(Z.size)


def test_particle_flow_breaks_down_at_linearised_time():
    """Softmax on S^1 at beta = 0.5 (sigma_1 = 2 sigma_2): measured t_delta of A_1 within 2 % of the prediction
    from the run's own A_1(0) (n = 2000, delta = 0.1)."""
    model = MultiHead.scalar([1.0], d=2, beta=0.5, kind="softmax")
    sigma = float(mf.growth_rates(model, l_max=2)[1])
    rng = np.random.default_rng(1)
    x0 = _circle(rng.uniform(0, 2 * np.pi, 2000))
    ts = np.linspace(0, 6, 61)
    tr = simulate(x0, model, t1=6.0, dt=0.05,
                  save=SaveAt(ts=ts, x=False, fn=lambda t, x: {"A": harmonic_amplitudes(x, 1)}))
    A = np.asarray(tr.saved["A"])[:, 1]
    got = breakdown_time(ts, A, 0.1)
    want = predicted_breakdown_time(A[0], sigma, 0.1)
    assert abs(got / want - 1) < 0.02


def test_slope_interval_with_seeds_per_n_is_calibrated():
    """t = c + s log n + Z/sigma with Z of the breakdown law (chi_2, the S^1 case) and unequal seeds per n:
    the count-weighted slope is unbiased and its 95 % bootstrap interval covers s in 88-99 % of 300 studies."""
    from metrics import fit_horizon_slope

    rng = np.random.default_rng(7)
    n, counts, s_true, sigma = np.array([1e3, 1e4, 1e5, 1e6]), np.array([40, 24, 12, 4]), 1.03, 0.485
    hits, slopes = 0, []
    for _ in range(300):
        z = -np.log(np.sqrt(rng.chisquare(2, size=(4, 40)) / 2))  # -log of a Rayleigh amplitude
        td = 2.0 + s_true * np.log(n)[:, None] + z / sigma
        td[np.arange(40) >= counts[:, None]] = np.nan  # the seeds not run
        s, lo, hi = fit_horizon_slope(n, td, counts=counts, n_boot=300, rng=rng)
        hits += lo <= s_true <= hi
        slopes.append(s)
    assert 0.88 <= hits / 300 <= 0.99
    assert abs(np.mean(slopes) - s_true) < 3 * np.std(slopes) / np.sqrt(300)
    # the count-weighted fit is the least-squares line through all runs
    ran = np.isfinite(td)
    assert s == pytest.approx(np.polyfit(np.log(n)[:, None].repeat(40, 1)[ran], td[ran], 1)[0], rel=1e-12)
