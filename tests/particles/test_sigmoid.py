"""Sigmoid attention (particles.Sigmoid, docs/theory.md "Sigmoid attention"): its weights, passes,
mean field through the Lagrangian scheme, and the softplus energy of which it is the gradient flow."""

import numpy as np
import pytest
from scipy.special import expit

import meanfield as mf
from particles import Ensemble, MultiHead, SaveAt, Sigmoid, project_tangent, sample_uniform, simulate
from particles.validation import InvalidParameterError
from tests.helpers import random_symmetric
from tests.particles.test_energy import flow_derivative


def test_weights_are_the_sigmoid_of_the_shifted_scores(rng):
    n, d = 7, 3
    model = MultiHead(rng.standard_normal((2, d, d)), beta=1.4, kind="sigmoid")
    x = sample_uniform(n, d=d, rng=rng)
    s = 1.4 * model.scores(x)
    np.testing.assert_allclose(model.weights(x), expit(s - np.log(n)), rtol=1e-14)
    biased = model.replace(kind=Sigmoid(bias=0.5))
    np.testing.assert_allclose(biased.weights(x), expit(s + 0.5), rtol=1e-14)
    v = np.einsum("hij,jd,hed->ie", biased.weights(x), x, biased.W)
    np.testing.assert_allclose(biased.velocity(x), project_tangent(x, v), rtol=1e-12, atol=1e-14)


def test_qkw_heads_causal_mask_and_large_beta(rng):
    n, d = 6, 4
    Q, K = rng.standard_normal((2, 2, d)), rng.standard_normal((2, 2, d))
    model = MultiHead.from_qk(Q, K, rng.standard_normal((2, d, d)), beta=0.8, kind="sigmoid", causal=True)
    x = sample_uniform(n, d=d, rng=rng)
    w = model.weights(x)
    assert np.all(w[:, np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] == 0)
    v = model.velocity(x)
    moved = x.copy()
    moved[-1] = sample_uniform(1, d=d, rng=rng)[0]  # the last token: no earlier one attends to it
    np.testing.assert_allclose(model.velocity(moved)[:-1], v[:-1], rtol=1e-13, atol=1e-15)
    hot = MultiHead(np.eye(d), beta=1e4, kind="sigmoid")  # expit saturates: no overflow
    assert np.all(np.isfinite(hot.velocity(x)))


def test_ensemble_is_the_model_system_by_system(rng):
    n, d = 8, 3
    M, W = random_symmetric(rng, 2, d), rng.standard_normal((2, d, d))
    x = np.stack([sample_uniform(n, d=d, rng=rng) for _ in range(2)])
    ens = Ensemble(M, W, beta=[0.5, 3.0], kind=Sigmoid(bias=-1.0))
    v = ens.velocity(x)
    for s, beta in enumerate([0.5, 3.0]):
        ref = MultiHead(M, W, beta=beta, kind=Sigmoid(bias=-1.0)).velocity(x[s])
        np.testing.assert_allclose(v[s], ref, rtol=1e-12, atol=1e-14)
    assert ens.exps_per_evaluation(n) == 2 * n * n


@pytest.mark.parametrize("geometry", ["sphere", "flat"])
def test_gradient_flow_of_the_softplus_energy(rng, geometry):
    """dE/dt = (2/n²) Σ_i |ẋ_i|² for symmetric M_h = W_h (docs/theory.md), as Theorem 11 is tested."""
    n, d = 7, 3
    model = MultiHead(random_symmetric(rng, 2, d, 0.7), beta=1.3, kind="sigmoid", geometry=geometry)
    x = sample_uniform(n, d=d, rng=rng)
    energy = model.attention.energy
    dissipation = 2.0 / n**2 * np.sum(model.velocity(x) ** 2)
    assert flow_derivative(model, x, lambda y: energy(model, y)) == pytest.approx(dissipation, rel=1e-8)
    traj = simulate(x, model, t1=2.0, dt=0.05, save=SaveAt(ts=np.linspace(0, 2, 9)))
    E = np.array([energy(model, y) for y in traj.x])
    assert np.all(np.diff(E) > 0)  # a Lyapunov function along the run


def test_mean_field_is_the_lagrangian_scheme(rng):
    n, d = 9, 3
    model = MultiHead(random_symmetric(rng, 2, d), beta=1.5, kind="sigmoid")
    x = sample_uniform(n, d=d, rng=rng)
    # n atoms of mass 1/n: the particle velocity (the pass weighs atom j by n w_j)
    np.testing.assert_allclose(mf.measure_velocity(model, x), model.velocity(x), rtol=1e-12, atol=1e-14)
    biased = model.replace(kind=Sigmoid(bias=-1.0))  # a kind with parameters is asked by its name
    np.testing.assert_allclose(mf.measure_velocity(biased, x), biased.velocity(x), rtol=1e-12, atol=1e-14)
    res = mf.wasserstein_ascent(mf.EmpiricalMeasure(x), model, t1=0.5, n_saves=3, dt=0.05)
    traj = simulate(x, model, t1=0.5, dt=0.05, save=SaveAt(ts=[0.0, 0.25, 0.5]))
    np.testing.assert_allclose(res.points, traj.x, rtol=0, atol=1e-12)
    with pytest.raises(InvalidParameterError, match="scheme='lagrangian'"):
        mf.wasserstein_ascent(mf.EmpiricalMeasure(x), model, t1=0.5, n_saves=3, scheme="jko", dt=0.1)


def test_fast_summation_refused_naming_the_exact_pass():
    with pytest.raises(InvalidParameterError, match="summation='exact' or 'auto'"):
        MultiHead(np.eye(3), beta=1.0, kind="sigmoid", summation="fast")


def test_bias_enters_the_record_only_off_its_default():
    default = MultiHead(np.eye(3), beta=1.0, kind=Sigmoid())
    assert default.kind == "sigmoid" and not any(k.startswith("kind_") for k in default.to_attrs())
    model = MultiHead(np.eye(3), beta=1.0, kind=Sigmoid(bias=-2.0))
    assert model.to_attrs()["kind_bias"] == -2.0
    assert MultiHead.from_attrs(model.to_attrs()).kind == Sigmoid(bias=-2.0)
