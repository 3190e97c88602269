"""Sinkhorn attention (particles.Sinkhorn, docs/theory.md "Sinkhorn attention"): k = 1 is softmax bit
for bit, the plan's row and column sums, large beta in the log domain, the passes, the Lagrangian mean
field, and the consistency check of the gradient-flow statement of Sander et al. for symmetric kernels."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import meanfield as mf
from particles import Ensemble, MultiHead, SaveAt, Sinkhorn, SolverError, sample_uniform, simulate
from particles.validation import InvalidParameterError
from tests.helpers import random_symmetric
from tests.particles.test_energy import flow_derivative


def test_one_normalisation_is_softmax_bit_for_bit(rng):
    M, W = rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 3, 3))
    x = sample_uniform(9, d=3, rng=rng)
    one = MultiHead(M, W, beta=2.5, kind=Sinkhorn(iterations=1))
    soft = MultiHead(M, W, beta=2.5, kind="softmax")
    assert np.array_equal(one.weights(x), soft.weights(x))
    np.testing.assert_allclose(one.velocity(x), soft.velocity(x), rtol=1e-12, atol=1e-14)
    causal = [MultiHead(M, W, beta=2.5, kind=k, causal=True) for k in (Sinkhorn(iterations=1), "softmax")]
    assert np.array_equal(causal[0].weights(x), causal[1].weights(x))


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 9), beta=st.floats(0.0, 40.0), k=st.integers(1, 12), seed=st.integers(0, 2**31))
def test_plan_rows_and_columns(n, beta, k, seed):
    """After a row step the rows sum to 1, after a column step the columns; with tol both (the columns within it)."""
    rng = np.random.default_rng(seed)
    x = sample_uniform(n, d=3, rng=rng)
    logits = beta * x @ random_symmetric(rng, 1, 3)[0] @ x.T
    A = Sinkhorn(iterations=k).plan(logits)
    assert np.all(np.isfinite(A)) and np.all(A >= 0)
    np.testing.assert_allclose(A.sum(axis=1 if k % 2 else 0), 1.0, atol=1e-12)
    tight = Sinkhorn(iterations=10_000, tol=1e-10).plan(np.clip(logits, -1, 1))
    np.testing.assert_allclose(tight.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(tight.sum(axis=0), 1.0, atol=1e-10)


def test_large_beta_stays_finite_and_tol_cap_is_named(rng):
    x = sample_uniform(8, d=3, rng=rng)
    model = MultiHead(np.eye(3), beta=5e3, kind=Sinkhorn(iterations=5))  # e^{5000}: no overflow in the log domain
    assert np.all(np.isfinite(model.velocity(x)))
    with pytest.raises(SolverError, match="iterations"):
        MultiHead(np.eye(3), beta=50.0, kind=Sinkhorn(iterations=3, tol=1e-14)).velocity(x)


def test_ensemble_and_weighted_atoms_are_the_model(rng):
    n, d = 7, 3
    M, W = rng.standard_normal((2, d, d)), rng.standard_normal((2, d, d))
    x = np.stack([sample_uniform(n, d=d, rng=rng) for _ in range(2)])
    kind = Sinkhorn(iterations=4)
    v = Ensemble(M, W, beta=[0.7, 2.0], kind=kind).velocity(x)
    for s, beta in enumerate([0.7, 2.0]):
        model = MultiHead(M, W, beta=beta, kind=kind)
        np.testing.assert_allclose(v[s], model.velocity(x[s]), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(mf.measure_velocity(model, x[1]), model.velocity(x[1]), rtol=1e-11, atol=1e-13)
    res = mf.wasserstein_ascent(mf.EmpiricalMeasure(x[1]), model, t1=0.4, n_saves=3, dt=0.05)
    traj = simulate(x[1], model, t1=0.4, dt=0.05, save=SaveAt(ts=[0.0, 0.2, 0.4]))
    np.testing.assert_allclose(res.points, traj.x, rtol=0, atol=1e-11)
    with pytest.raises(InvalidParameterError, match="scheme='lagrangian'"):
        mf.wasserstein_ascent(mf.EmpiricalMeasure(x[1]), model, t1=0.4, n_saves=3, scheme="jko", dt=0.1)
    with pytest.raises(InvalidParameterError, match="atoms themselves"):
        mf.measure_velocity(model, x[1], at=x[0])


@pytest.mark.parametrize("geometry", ["sphere", pytest.param("flat", marks=pytest.mark.slow)])
def test_consistency_check_of_the_gradient_flow_for_symmetric_kernels(rng, geometry):
    """Converged Sinkhorn attention with symmetric M_h = W_h ascends F = -(1/2β) Σ_h OT_h(μ_n, μ_n) with
    dF/dt = (1/n) Σ_i |ẋ_i|² (docs/theory.md: the statement of Sander et al. as derived there)."""
    n, d = 6, 3
    kind = Sinkhorn(iterations=100_000, tol=1e-13)
    model = MultiHead(random_symmetric(rng, 2, d, 0.6), beta=1.2, kind=kind, geometry=geometry)
    x = sample_uniform(n, d=d, rng=rng)
    F = model.attention.energy
    assert flow_derivative(model, x, lambda y: F(model, y)) == pytest.approx(
        np.sum(model.velocity(x) ** 2) / n, rel=1e-7)
    # the plan of a symmetric kernel is symmetric (the scaling D K D)
    A = model.weights(x)
    np.testing.assert_allclose(A, A.transpose(0, 2, 1), atol=1e-12)


def test_iterations_enter_the_record_only_off_their_default():
    assert MultiHead(np.eye(3), kind=Sinkhorn()).kind == "sinkhorn"
    model = MultiHead(np.eye(3), kind=Sinkhorn(iterations=7, tol=1e-9))
    attrs = model.to_attrs()
    assert attrs["kind_iterations"] == 7 and attrs["kind_tol"] == 1e-9
    assert MultiHead.from_attrs(attrs).kind == Sinkhorn(iterations=7, tol=1e-9)
    with pytest.raises(InvalidParameterError, match="summation='exact' or 'auto'"):
        MultiHead(np.eye(3), kind="sinkhorn", summation="fast")
