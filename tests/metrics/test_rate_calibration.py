"""Calibration of the limit study's rate intervals (metrics.fit_rate).

Synthetic studies with a known exponent: the gaps are the study's own transport distances
between n i.i.d. samples of a known density and that density (exact quantiles, no reference
error), for which E g(n) ~ c n^{-1/2}. Over B studies the nominal 95 % interval must cover
-1/2 in 93-97 % of them (B = 1000: the binomial standard deviation of the coverage is 0.7 %).
"""

import numpy as np
import pytest
from ot.sliced import get_random_projections

import metrics
from metrics._observables import reference_transport

NS = np.array([32, 64, 128, 256])
B, S = 1000, 4  # studies, seeds per n
A = 0.5  # density 1 + A cos(theta) on S^1, 1 + A x_3 on S^2


def _circle_quantile(u):
    """F^{-1}(u) of 1 + A cos(theta) on [0, 2 pi): F(theta) = (theta + A sin theta) / (2 pi), Newton."""
    th = 2 * np.pi * u
    for _ in range(40):
        th -= (th + A * np.sin(th) - 2 * np.pi * u) / (1 + A * np.cos(th))
    return th


def _coverage(g, paired=False):
    fits = np.array([metrics.fit_rate(NS, g[b], paired=paired) for b in range(len(g))])
    return np.mean((fits[:, 1] <= -0.5) & (-0.5 <= fits[:, 2])), fits


def _circle_gaps(nested: bool):
    """W1 (closed form, the study's S^1 transport) between samples and the exact quantile atoms."""
    rng = np.random.default_rng(20)
    g = np.empty((B, len(NS), S))
    big = _circle_quantile(rng.uniform(size=(B * S, NS[-1]))) / (2 * np.pi) if nested else None
    for a, n in enumerate(NS):
        atoms = _circle_quantile((np.arange(4 * n) + 0.5) / (4 * n)) / (2 * np.pi)
        u = big[:, :n] if nested else _circle_quantile(rng.uniform(size=(B * S, n))) / (2 * np.pi)
        g[:, a, :] = (2 * np.pi * reference_transport._circle_w1(u, atoms)).reshape(B, S)
    return g


@pytest.mark.parametrize("nested", [False, True], ids=["independent", "nested-paired"])
def test_circle_rate_intervals_are_calibrated(nested):
    g = _circle_gaps(nested)
    cov, fits = _coverage(g, paired=nested)
    assert 0.93 <= cov <= 0.97, cov
    assert abs(fits[:, 0].mean() + 0.5) < 0.01  # the estimator is unbiased for the exponent here


def test_circle_closed_form_batch_matches_emd2():
    """The vectorised W1 used above is the study's closed form, which agrees with ot.emd2."""
    rng = np.random.default_rng(1)
    u = rng.uniform(size=(3, 40))
    v = np.sort(rng.uniform(size=90))
    batch = 2 * np.pi * reference_transport._circle_w1(u, v)
    for row, val in zip(u, batch):
        assert val == pytest.approx(metrics.circle_wasserstein(2 * np.pi * row, 2 * np.pi * v, p=1,
                                                             method="emd2")[0], rel=1e-10, abs=1e-13)


def _sphere_projected_quantile(u, c):
    """Quantile of <theta, x> for x ~ 1 + A x_3 on S^2 with theta_3 = c: the projection of the uniform
    law is U[-1, 1] (Archimedes) and E[x_3 | <theta, x> = t] = c t, so the density is (1 + A c t)/2."""
    q = A * c / 4  # F(t) = q t^2 + t/2 + 1/2 - q
    disc = 0.25 - 4 * q * (0.5 - q - u)
    safe = np.where(np.abs(q) > 1e-12, q, 1.0)
    return np.where(np.abs(q) > 1e-12, (-0.5 + np.sqrt(np.maximum(disc, 0.0))) / (2 * safe), 2 * u - 1)


def test_sphere_rate_intervals_are_calibrated():
    """S^2: the study's sliced SW2 (SlicedReference) against the exact projected quantiles."""
    from metrics import sample_sphere_density

    theta = get_random_projections(3, 16, seed=0).T
    M = 2048
    atoms = _sphere_projected_quantile(((np.arange(M) + 0.5) / M)[:, None], theta[None, :, 2])[None]
    ref = metrics.SlicedReference.from_atoms(theta, atoms)
    rng = np.random.default_rng(21)
    g = np.empty((B, len(NS), S))
    for a, n in enumerate(NS):
        x = sample_sphere_density(lambda y: 1 + A * y[:, 2], B * S * n, d=3, rng=rng).reshape(B * S, n, 3)
        g[:, a, :] = np.sqrt(ref.per_projection(x, 0).mean(-1)).reshape(B, S)
    cov, fits = _coverage(g)
    assert 0.93 <= cov <= 0.97, cov
    assert abs(fits[:, 0].mean() + 0.5) < 0.01


def test_fit_rate_paired_interval_is_a_seed_level_t_interval():
    """With one n-pair the paired slope is the mean of per-seed slopes (to first order), and
    its interval widens as 1/sqrt(S) shrinks: the t quantile with S - 1 degrees of freedom."""
    rng = np.random.default_rng(3)
    n = np.array([100.0, 400.0])
    g = np.exp(rng.normal(size=(2, 6)) * 0.05) / np.sqrt(n)[:, None]
    fit = metrics.fit_rate(n, g, paired=True)
    assert fit.dof == 5 and fit.lo < fit.rate < fit.hi
    assert fit.rate == pytest.approx(np.polyfit(np.log(n), np.log(g.mean(1)), 1)[0], rel=1e-12)
    from scipy import stats

    assert fit.hi - fit.rate == pytest.approx(stats.t.ppf(0.975, 5) * fit.stderr, rel=1e-12)


def test_rate_intervals_with_seeds_per_n_are_calibrated():
    """Independent samples with more seeds at small n (counts 8, 6, 4, 2): the Welch t interval over
    the seeds each n has still covers -1/2 in 93-97 % of the synthetic studies."""
    rng = np.random.default_rng(22)
    counts = np.array([8, 6, 4, 2])
    g = np.full((B, len(NS), 8), np.nan)
    for a, n in enumerate(NS):
        atoms = _circle_quantile((np.arange(4 * n) + 0.5) / (4 * n)) / (2 * np.pi)
        u = _circle_quantile(rng.uniform(size=(B * counts[a], n))) / (2 * np.pi)
        g[:, a, :counts[a]] = (2 * np.pi * reference_transport._circle_w1(u, atoms)).reshape(B, counts[a])
    fits = np.array([metrics.fit_rate(NS, g[b], counts=counts) for b in range(B)])
    cov = np.mean((fits[:, 1] <= -0.5) & (-0.5 <= fits[:, 2]))
    assert 0.93 <= cov <= 0.97, cov
    assert abs(fits[:, 0].mean() + 0.5) < 0.01


def test_fit_rate_ignores_what_lies_beyond_the_seeds_of_each_n():
    rng = np.random.default_rng(5)
    n = np.array([100.0, 400.0, 1600.0])
    counts = np.array([5, 3, 2])
    g = np.exp(rng.normal(size=(3, 5)) * 0.1) / np.sqrt(n)[:, None]
    junk = g.copy()
    for i, c in enumerate(counts):
        junk[i, c:] = [np.nan, np.inf, -1.0][i % 3]
    for interval in ("t", "bootstrap"):
        a = metrics.fit_rate(n, g, counts=counts, interval=interval, rng=1)
        b = metrics.fit_rate(n, junk, counts=counts, interval=interval, rng=1)
        np.testing.assert_array_equal(np.array(a), np.array(b))  # NaN dof of the bootstrap compares equal
        assert np.isfinite(a.lo)
    means = np.array([g[i, :c].mean() for i, c in enumerate(counts)])
    assert a.rate == pytest.approx(np.polyfit(np.log(n), np.log(means), 1)[0], rel=1e-12)
    # equal counts are the plain fit
    assert metrics.fit_rate(n, g[:, :2], counts=[2, 2, 2]) == metrics.fit_rate(n, g[:, :2])
    with pytest.raises(ValueError, match="counts of fit_rate must be equal for paired=True"):
        metrics.fit_rate(n, g, counts=counts, paired=True)
    with pytest.raises(ValueError, match=r"counts of fit_rate must be integers in \[1, 5\]"):
        metrics.fit_rate(n, g, counts=[6, 3, 2])
