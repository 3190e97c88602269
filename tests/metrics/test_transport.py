"""OT metrics: known values, symmetry, identity, rotation invariance, bad input."""

import numpy as np
import pytest

from metrics import distance_to_uniform, sinkhorn_divergence, sliced_wasserstein_sphere, wasserstein
from particles import InvalidParameterError, sample_uniform


def rotation(rng, d):
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return q


def test_wasserstein_known_values():
    e = np.eye(3)
    # a Dirac moved by a quarter turn: W_p = π/2 for every p
    for p in (1, 2, 3):
        assert wasserstein(e[:1], e[1:2], p=p) == pytest.approx(np.pi / 2, rel=1e-12)
    # half the mass moved by π/2: W_1 = π/4, W_2 = (π²/8)^{1/2}
    x = e[:2]
    y = np.array([e[0], e[2]])
    assert wasserstein(x, y, p=1) == pytest.approx(np.pi / 4, rel=1e-12)
    assert wasserstein(x, y, p=2) == pytest.approx(np.sqrt(np.pi**2 / 8), rel=1e-12)


@pytest.mark.parametrize("fn", [wasserstein, sinkhorn_divergence, sliced_wasserstein_sphere])
def test_metric_axioms_and_rotation_invariance(rng, fn):
    x = sample_uniform(20, d=3, rng=rng)
    y = sample_uniform(25, d=3, rng=rng)
    assert fn(x, x) == pytest.approx(0.0, abs=1e-9)
    dxy = fn(x, y)
    assert dxy > 1e-3
    if fn is not sliced_wasserstein_sphere:  # random projections are not rotated with the data
        assert fn(y, x) == pytest.approx(dxy, rel=1e-6)
        q = rotation(rng, 3)
        assert fn(x @ q.T, y @ q.T) == pytest.approx(dxy, rel=1e-6)


def test_weights_matter_and_uniform_default(rng):
    x = sample_uniform(10, d=3, rng=rng)
    y = sample_uniform(10, d=3, rng=rng)
    assert wasserstein(x, y) == pytest.approx(wasserstein(x, y, np.full(10, 0.1), np.full(10, 0.1)), rel=1e-12)
    a = np.zeros(10)
    a[0] = 1.0
    assert wasserstein(x, x, a) > 0


def test_sinkhorn_bounds_exact(rng):
    x = sample_uniform(20, d=3, rng=rng)
    y = sample_uniform(20, d=3, rng=rng)
    w2sq = wasserstein(x, y, p=2) ** 2
    s_big = sinkhorn_divergence(x, y, reg=0.5)
    s_small = sinkhorn_divergence(x, y, reg=0.05, max_iter=50000, tol=1e-8)
    assert 0 < s_big < s_small <= w2sq * 1.001
    assert abs(s_small - w2sq) < 0.2 * w2sq  # approaches W2² as reg → 0


def test_sliced_same_seed_same_value_and_uniform(rng):
    x = sample_uniform(40, d=3, rng=rng)
    y = sample_uniform(40, d=3, rng=rng)
    assert sliced_wasserstein_sphere(x, y, seed=3) == sliced_wasserstein_sphere(x, y, seed=3)
    far = distance_to_uniform(np.tile(np.eye(3)[:1], (40, 1)))
    near = distance_to_uniform(sample_uniform(4000, d=3, rng=rng))
    assert near < 0.02 < far


def test_transport_bad_input(rng):
    x = sample_uniform(5, d=3, rng=rng)
    with pytest.raises(InvalidParameterError, match="same R\\^d"):
        wasserstein(x, sample_uniform(5, d=4, rng=rng))
    with pytest.raises(InvalidParameterError, match="must lie on the unit sphere"):
        wasserstein(2 * x, x)
    with pytest.raises(InvalidParameterError, match=r"'a' parameter of wasserstein must sum to 1"):
        wasserstein(x, x, np.ones(5))
    with pytest.raises(InvalidParameterError, match=r"'b' parameter of wasserstein: must have one entry per row of y"):
        wasserstein(x, x, None, np.ones(4) / 4)


def test_dense_distances_refuse_large_clouds(monkeypatch):
    from metrics._observables import transport

    monkeypatch.setattr(transport, "MAX_DENSE_PAIRS", 100)
    x = sample_uniform(11, d=3, rng=0)
    for fn in (wasserstein, sinkhorn_divergence):
        with pytest.raises(InvalidParameterError,
                           match=r"121 pairs > MAX_DENSE_PAIRS = 100.*sliced_wasserstein_sphere"):
            fn(x, x[::-1])
    assert sliced_wasserstein_sphere(x, x[::-1]) >= 0.0  # the scalable one still runs


def test_sliced_chunks_equal_pot(monkeypatch):
    import ot

    from metrics._observables import transport

    monkeypatch.setattr(transport, "_SLICED_CHUNK_ENTRIES", 50)  # one or two projections per chunk
    x, y = sample_uniform(30, d=3, rng=1), sample_uniform(20, d=3, rng=2)
    assert sliced_wasserstein_sphere(x, y, seed=4) == pytest.approx(
        ot.sliced_wasserstein_sphere(x, y, n_projections=200, seed=4), rel=1e-12)
    assert distance_to_uniform(x, seed=4) == pytest.approx(
        ot.sliced_wasserstein_sphere_unif(x, n_projections=200, seed=4), rel=1e-12)


def test_over_relaxed_sinkhorn_solves_the_same_problem():
    """The over-relaxed cross term (omega = 1.8) and plain Sinkhorn (omega = 1) reach the same dual
    value, both with marginal errors below tol."""
    from metrics._observables import transport

    rng = np.random.default_rng(8)
    x, y = sample_uniform(60, d=3, rng=rng), sample_uniform(90, d=3, rng=rng)
    a, b = np.full(60, 1 / 60), np.full(90, 1 / 90)
    C = transport._cost(x, y, 2)
    fast, e1 = transport._entropic_dual(a, b, C, 0.05, 100_000, 1e-10)
    plain, e2 = transport._entropic_dual(a, b, C, 0.05, 100_000, 1e-10, omega=1.0)
    assert max(e1, e2) < 1e-10 and fast == pytest.approx(plain, abs=1e-12)
