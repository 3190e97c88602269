"""Contract of every attention kind: dense reference, equivariances, gradients, stability."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from particles import KINDS, MultiHead, SolverError, project_tangent, sample_uniform
from tests.helpers import dense_energy, dense_velocity, random_symmetric

KIND_NAMES = sorted(KINDS)


@pytest.mark.parametrize("kind", KIND_NAMES)
@pytest.mark.parametrize("geometry", ["sphere", "flat"])
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("block", [7, 2**18])
def test_velocity_matches_dense_reference(rng, kind, geometry, symmetric, block):
    n, d, H = 13, 4, 3
    M = random_symmetric(rng, H, d) if symmetric else rng.standard_normal((H, d, d))
    W = rng.standard_normal((H, d, d))
    x = sample_uniform(n, d=d, rng=rng)
    if geometry == "flat":
        x = x * rng.uniform(0.5, 1.5, size=(n, 1))
    model = MultiHead(M, W, beta=1.7, kind=kind, geometry=geometry, block_elements=block)
    v = model.velocity(x)
    assert v.dtype == np.float64
    np.testing.assert_allclose(v, dense_velocity(model, x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_permutation_equivariance(rng, kind):
    n, d = 11, 3
    model = MultiHead(random_symmetric(rng, 2, d), beta=2.0, kind=kind)
    x = sample_uniform(n, d=d, rng=rng)
    perm = rng.permutation(n)
    np.testing.assert_allclose(model.velocity(x[perm]), model.velocity(x)[perm], atol=1e-13)


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_rotation_equivariance_scalar_heads(rng, kind):
    n, d = 9, 4
    model = MultiHead.scalar([1.0, 0.4], d=d, beta=1.5, kind=kind)
    x = sample_uniform(n, d=d, rng=rng)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    np.testing.assert_allclose(model.velocity(x @ q.T), model.velocity(x) @ q.T, atol=1e-13)
    np.testing.assert_allclose(model.energy(x @ q.T), model.energy(x), rtol=1e-13)


def test_softmax_rows_sum_to_one(rng):
    model = MultiHead(rng.standard_normal((2, 3, 3)), beta=5.0, kind="softmax")
    w = model.weights(sample_uniform(10, d=3, rng=rng))
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-14)


def test_rownorm_relu_rows_sum_to_one_or_zero(rng):
    model = MultiHead(-np.eye(3), beta=2.0, kind="relu_rownorm")
    x = sample_uniform(10, d=3, rng=rng)
    sums = model.weights(x).sum(-1)
    assert np.all((np.abs(sums - 1) < 1e-14) | (sums == 0))


@pytest.mark.parametrize("symmetric", [True, False])
def test_energy_gradient_by_central_differences(rng, symmetric):
    n, d, H = 6, 3, 2
    M = random_symmetric(rng, H, d) if symmetric else rng.standard_normal((H, d, d))
    model = MultiHead(M, beta=0.8, kind="usa", geometry="flat")
    x = 0.6 * rng.standard_normal((n, d))
    g = model.energy_gradient(x)
    h = 1e-5
    fd = np.zeros_like(x)
    for i in range(n):
        for k in range(d):
            e = np.zeros_like(x)
            e[i, k] = h
            fd[i, k] = (model.energy(x + e) - model.energy(x - e)) / (2 * h)
    # central differences: truncation O(h²) and round-off eps·E/h, both ≲ 1e-9 here
    np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-8 * np.abs(g).max())


def test_usa_velocity_is_projected_gradient(rng):
    """Proof of Theorem 11: ∇_{x_i} E_multi = v_i / n under C3 + C4."""
    n, d = 10, 4
    model = MultiHead(random_symmetric(rng, 3, d), beta=1.2, kind="usa")
    x = sample_uniform(n, d=d, rng=rng)
    np.testing.assert_allclose(model.velocity(x), project_tangent(x, n * model.energy_gradient(x)), atol=1e-12)


def test_energy_matches_dense_and_log_energy(rng):
    model = MultiHead(random_symmetric(rng, 2, 3), beta=3.0)
    x = sample_uniform(12, d=3, rng=rng)
    np.testing.assert_allclose(model.head_energies(x), dense_energy(model, x), rtol=1e-13)
    np.testing.assert_allclose(model.log_head_energies(x), np.log(dense_energy(model, x)), rtol=1e-13)


def test_beta_zero_energy_is_finite_part(rng):
    model0 = MultiHead(random_symmetric(rng, 1, 3), beta=0.0)
    x = sample_uniform(8, d=3, rng=rng)
    eps = 1e-7
    small = MultiHead(model0.M, beta=eps)
    # E_h(β) − 1/(2β) → (1/(2n²)) Σ s_ij as β → 0
    np.testing.assert_allclose(small.head_energies(x) - 1 / (2 * eps), model0.head_energies(x), atol=1e-6)


def test_large_beta_softmax_is_finite_and_exact(rng):
    n, d = 20, 3
    M = random_symmetric(rng, 2, d)
    x = sample_uniform(n, d=d, rng=rng)
    model = MultiHead(M, beta=1e3, kind="softmax")
    v = model.velocity(x)
    assert np.all(np.isfinite(v))
    np.testing.assert_allclose(v, dense_velocity(model, x), atol=1e-10)
    logE = model.log_head_energies(x)
    assert np.all(np.isfinite(logE)) and np.all(logE > 100)  # E itself is ~exp(1000)
    ent = model.entropy(x)
    assert np.all(np.isfinite(ent)) and np.all(ent >= 0)


def test_underflow_fallback_uses_exact_row_max(rng):
    """M = −I at β = 1e3 on a tight cluster: the Cauchy–Schwarz shift overshoots by ~2000."""
    n, d = 15, 3
    x = rng.standard_normal((n, d)) * 0.01 + np.array([0, 0, 1.0])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    model = MultiHead(-np.eye(d), beta=1e3, kind="softmax", block_elements=16)
    np.testing.assert_allclose(model.velocity(x), dense_velocity(model, x), atol=1e-9)
    ent = model.entropy(x)
    s = -1e3 * x @ x.T
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = -np.nansum(np.where(p > 0, p * np.log(p), 0.0), axis=1)
    np.testing.assert_allclose(ent[0], ref, atol=1e-9)


def test_usa_overflow_raises_and_auto_time_scale_fixes_it(rng):
    x = sample_uniform(10, d=3, rng=rng)
    model = MultiHead(np.eye(3), beta=1e3, kind="usa")
    with pytest.raises(SolverError, match="log_time_scale='auto'"):
        model.velocity(x)
    scaled = MultiHead(np.eye(3), beta=1e3, kind="usa", log_time_scale="auto")
    assert scaled.log_time_scale == pytest.approx(1e3)
    v = scaled.velocity(x)
    assert np.all(np.isfinite(v))
    ref = MultiHead(np.eye(3), beta=30.0, kind="usa")
    ref_scaled = MultiHead(np.eye(3), beta=30.0, kind="usa", log_time_scale=30.0)
    expected = np.exp(-30.0) * ref.velocity(x)
    np.testing.assert_allclose(ref_scaled.velocity(x), expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 12),
    d=st.integers(2, 5),
    beta=st.floats(0.0, 50.0),
    seed=st.integers(0, 2**31),
    kind=st.sampled_from(KIND_NAMES),
)
@example(n=2, d=2, beta=5e-324, seed=0, kind="relu_rownorm")  # subnormal β: weights must not depend on it
def test_property_blocked_equals_dense_and_tangent(n, d, beta, seed, kind):
    rng = np.random.default_rng(seed)
    model = MultiHead(random_symmetric(rng, 2, d), beta=beta, kind=kind, block_elements=3 * n,
                      log_time_scale="auto")
    x = sample_uniform(n, d=d, rng=rng)
    v = model.velocity(x)
    ref = dense_velocity(model, x)
    np.testing.assert_allclose(v, ref, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(ref).max()))
    np.testing.assert_allclose(np.einsum("ij,ij->i", v, x), 0.0, atol=1e-10 * max(1.0, np.abs(v).max()))


@pytest.mark.parametrize("kind", ["softmax", "usa"])
def test_symmetric_tiled_pass_matches_dense(rng, kind):
    """n ≥ 512 and M = Mᵀ take the half-exp tiled pass; it must agree with the dense reference."""
    n, d = 530, 3
    model = MultiHead(random_symmetric(rng, 2, d), beta=2.5, kind=kind, block_elements=2**13)
    x = sample_uniform(n, d=d, rng=rng)
    ref = dense_velocity(model, x)
    np.testing.assert_allclose(model.velocity(x), ref, atol=1e-13 * np.abs(ref).max())
    s = model.beta * model.scores(x)
    np.testing.assert_allclose(model.log_head_energies(x),
                               np.log(np.exp(s).sum(axis=(1, 2)) / (2 * model.beta * n * n)), rtol=1e-13)


def test_symmetric_tiled_pass_underflow_fallback(rng):
    n, d = 520, 3
    x = rng.standard_normal((n, d)) * 0.01 + np.array([0, 0, 1.0])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    model = MultiHead(-np.eye(d), beta=1e3, kind="softmax")
    ref = dense_velocity(model, x)
    np.testing.assert_allclose(model.velocity(x), ref, atol=1e-9)
