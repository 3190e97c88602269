"""Densities on the sphere: the points convention, the exact S^1 quantile, the rejection sampler."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metrics
from metrics import check_density_fn, circle_density_quantile, sample_circle_density, sample_sphere_density
from particles.validation import InvalidParameterError

A = 0.5


def _rho(x):
    return 1 + A * x[:, 0]  # 1 + A cos(theta)


def _exact_quantile(u):
    """F^{-1} of 1 + A cos theta: F(theta) = (theta + A sin theta)/(2 pi), by Newton to round-off."""
    th = 2 * np.pi * u
    for _ in range(50):
        th -= (th + A * np.sin(th) - 2 * np.pi * u) / (1 + A * np.cos(th))
    return th


def test_circle_quantile_converges_at_second_order():
    u = np.linspace(0.01, 0.99, 97)
    errs = [np.max(np.abs(circle_density_quantile(_rho, u, m=m) - _exact_quantile(u))) for m in (64, 128, 256, 512)]
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(np.abs(orders - 2) < 0.2), orders
    assert circle_density_quantile(_rho, u).max() < 2 * np.pi
    # the default m = 4096 is accurate to ~1e-6 rad, far below any n^{-1/2} signal
    assert np.max(np.abs(circle_density_quantile(_rho, u) - _exact_quantile(u))) < 1e-5


def test_circle_quantile_is_exact_for_piecewise_linear_densities():
    """A density linear between the nodes (two tents, nodes every pi/4) is its own interpolant: the
    quantiles match the closed form."""
    rho = metrics.density_of_angle(lambda th: np.interp(np.mod(th, 2 * np.pi), [0, np.pi / 2, np.pi, 1.5 * np.pi,
                                                                                 2 * np.pi], [0, 1, 0, 1, 0]))
    u = np.array([0.0625, 0.125, 0.25])
    q = circle_density_quantile(rho, u, m=8)
    # on [0, pi/2] the density is theta/(pi/2), total mass pi/2 (two tents), F(theta) = theta^2/pi^2
    np.testing.assert_allclose(q, np.pi * np.sqrt(u), rtol=1e-12)


def test_sphere_sampler_moments_and_reproducibility():
    for d in (3, 4):
        n = 40_000
        x = sample_sphere_density(lambda y: 1 + A * y[:, 0], n, d=d, rng=7)
        assert np.max(np.abs(np.linalg.norm(x, axis=1) - 1)) < 1e-14
        # E x_1 = A E[x_1^2] = A/d under 1 + A x_1 (normalised by the uniform mean 1)
        assert abs(x[:, 0].mean() - A / d) < 4 * x[:, 0].std() / np.sqrt(n)
        np.testing.assert_array_equal(x, sample_sphere_density(lambda y: 1 + A * y[:, 0], n, d=d, rng=7))
    y = sample_sphere_density(_rho, 5000, d=2, rng=1)  # d = 2 goes through the exact inverse CDF
    assert abs(y[:, 0].mean() - A / 2) < 4 * y[:, 0].std() / np.sqrt(5000)


def test_sphere_sampler_refuses_a_violated_bound():
    with pytest.raises(InvalidParameterError, match="exceeds the rejection bound"):
        sample_sphere_density(lambda y: 1 + A * y[:, 2], 100, d=3, rng=0, bound=1.0)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 50), d=st.integers(2, 5), seed=st.integers(0, 2**32 - 1))
def test_samples_are_on_the_sphere(n, d, seed):
    x = sample_sphere_density(lambda y: 1.5 + np.tanh(y[:, -1]), n, d=d, rng=seed)
    assert x.shape == (n, d) and np.max(np.abs(np.linalg.norm(x, axis=1) - 1)) < 1e-14


@pytest.mark.parametrize("fn, match", [
    (lambda th: 1 + np.cos(th), "density_of_angle"),        # a function of the angle on S^1
    (lambda y: 1 + y[:, 5], r"raised IndexError"),           # wrong coordinate count
    (lambda y: -np.ones(len(y)), "non-negative"),
    (lambda y: np.full(len(y), np.nan), "finite"),
    (lambda y: np.zeros(len(y)), "positive sum"),
    ("1 + x", "callable"),
])
def test_wrong_density_says_which_rule(fn, match):
    with pytest.raises(InvalidParameterError, match=match):
        check_density_fn(fn, 2 if "density_of_angle" in match else 3, "caller")


def test_circle_sampler_matches_the_exact_law():
    """Kolmogorov distance of 20000 draws to the exact CDF below the 0.999 KS quantile 1.95/sqrt(n)."""
    n = 20_000
    x = sample_circle_density(_rho, n, rng=3)
    th = np.sort(np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi))
    F = (th + A * np.sin(th)) / (2 * np.pi)
    i = np.arange(1, n + 1)
    ks = max(np.max(i / n - F), np.max(F - (i - 1) / n))
    assert ks < 1.95 / np.sqrt(n)
