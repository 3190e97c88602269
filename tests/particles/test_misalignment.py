"""Theorem 12 (value misalignment) along simulated trajectories, for random Δ of several sizes."""

import numpy as np
import pytest

from particles import (
    MISALIGNMENT,
    MultiHead,
    SaveAt,
    delta_v,
    diagnose,
    misaligned_model,
    misalignment_fn,
    misalignment_rates,
    sample_uniform,
    simulate,
    value_misalignment,
)
from tests.helpers import random_symmetric


def richardson_rates(ts, values, centres, tau):
    """d/dt of a saved scalar at each centre, from saves at centre ± tau, ± 2 tau (error O(tau⁴))."""
    at = {round(t / tau): v for t, v in zip(ts, values)}
    out = []
    for c in centres:
        k = round(c / tau)
        d1 = (at[k + 1] - at[k - 1]) / (2 * tau)
        d2 = (at[k + 2] - at[k - 2]) / (4 * tau)
        out.append((4 * d1 - d2) / 3)
    return np.array(out)


@pytest.mark.parametrize("geometry", ["sphere", "flat"])
@pytest.mark.parametrize("eps", [0.0, 0.03, 0.3, 1.5])
def test_split_and_bounds_along_trajectory(rng, eps, geometry):
    n, d, H = 7, 3, 2
    tau = 2e-3 if geometry == "sphere" else 5e-4
    # flat USA flows blow up in finite time (|x| grows, so does exp(β s)): milder heads there
    M = random_symmetric(rng, H, d, 0.6 if geometry == "sphere" else 0.3)
    Delta = eps * rng.standard_normal((H, d, d))
    model = misaligned_model(M, Delta, beta=1.1, geometry=geometry)
    centres = np.array([0.1, 0.9]) if geometry == "sphere" else np.array([0.02, 0.1])
    ts = np.unique(np.round((centres[:, None] + tau * np.arange(-2, 3)[None]) / tau).ravel()) * tau
    traj = simulate(sample_uniform(n, d=d, rng=rng), model, t1=float(ts[-1]), dt=tau,
                    save=SaveAt(ts=ts, fn=misalignment_fn(model)))
    s = traj.saved
    # the split is an identity, and the exact rate is dE/dt of the simulated energy
    assert np.abs(s["split_residual"]).max() < 1e-12 * np.abs(s["kinetic"]).max()
    E = np.array([model.energy(x) for x in traj.x])
    fd = richardson_rates(traj.t, E, centres, tau)
    idx = [int(np.argmin(np.abs(traj.t - c))) for c in centres]
    np.testing.assert_allclose(fd, s["energy_rate"][idx], rtol=1e-6, atol=1e-9 * np.abs(E).max())
    # the chain of lower bounds (Cauchy–Schwarz, then s(s - δ) >= -δ²/4)
    tol = 1e-12 * np.abs(s["kinetic"]).max()
    assert np.all(s["energy_rate"] >= s["local_bound"] - tol)
    assert np.all(s["local_bound"] >= s["speed_bound"] - tol)
    assert np.all(s["speed_bound"] >= s["uniform_bound"] - tol)
    assert np.all(s["energy_rate"][s["certified"] == 1] >= -tol)
    if eps == 0.0:
        assert np.all(s["delta_v"] == 0) and np.all(s["certified"] == 1)
        np.testing.assert_allclose(s["energy_rate"], s["kinetic"], rtol=0, atol=tol)  # Theorem 11


def test_matches_dense_formula_and_diagnose(rng):
    n, d, H = 6, 4, 3
    M = random_symmetric(rng, H, d)
    Delta = 0.4 * rng.standard_normal((H, d, d))
    model = misaligned_model(M, Delta, beta=0.8)
    x = sample_uniform(n, d=d, rng=rng)
    out = misalignment_rates(model, x)
    w = np.exp(model.beta * model.scores(x))
    D = np.einsum("hij,jd,hed->ie", w, x, Delta)
    xdot = model.velocity(x)
    assert out["misalignment_term"] == pytest.approx(np.sum(D * xdot) / n**2, rel=1e-12)
    assert out["energy_rate"] == pytest.approx(diagnose(model, x)["energy_rate"], rel=1e-12)
    dv = sum(np.linalg.norm(Dh, 2) * np.exp(model.beta * np.linalg.norm(Mh, 2)) for Dh, Mh in zip(Delta, M))
    assert out["delta_v"] == pytest.approx(dv, rel=1e-13)
    assert np.all(np.linalg.norm(D, axis=1) / n <= dv)  # ‖D_i‖ ≤ n δ_V
    np.testing.assert_array_equal(value_misalignment(model), model.W - model.M)
    assert set(out) == set(MISALIGNMENT)


def test_misalignment_can_lower_the_energy_but_not_below_the_bound(rng):
    """A large skew Δ makes dE/dt < 0 somewhere; the bound -δ_V²/4 still holds there."""
    n, d = 6, 3
    M = np.eye(d)[None]
    A = rng.standard_normal((d, d))
    model = misaligned_model(M, 3.0 * (A - A.T)[None], beta=1.0)
    worst = min((misalignment_rates(model, sample_uniform(n, d=d, rng=rng)) for _ in range(200)),
                key=lambda o: o["energy_rate"])
    assert worst["energy_rate"] < 0
    assert worst["energy_rate"] >= worst["local_bound"] >= worst["uniform_bound"]


def test_log_time_scale_units(rng):
    """Rescaled time: velocities, D and δ_V scale by e^{-c}, rates by e^{-2c}."""
    M = random_symmetric(rng, 2, 3)
    Delta = 0.2 * rng.standard_normal((2, 3, 3))
    x = sample_uniform(5, d=3, rng=rng)
    plain = misalignment_rates(misaligned_model(M, Delta, beta=2.0), x)
    scaled_model = misaligned_model(M, Delta, beta=2.0, log_time_scale="auto")
    c = scaled_model.log_time_scale
    scaled = misalignment_rates(scaled_model, x)
    assert scaled["delta_v"] == pytest.approx(plain["delta_v"] * np.exp(-c), rel=1e-12)
    for key in ("energy_rate", "kinetic", "misalignment_term", "speed_bound", "uniform_bound"):
        assert scaled[key] == pytest.approx(plain[key] * np.exp(-2 * c), rel=1e-10), key


def test_flat_delta_v_uses_radius(rng):
    M = random_symmetric(rng, 1, 3)
    Delta = 0.1 * rng.standard_normal((1, 3, 3))
    model = misaligned_model(M, Delta, beta=0.5, geometry="flat")
    x = 2.0 * sample_uniform(4, d=3, rng=rng)
    expected = np.linalg.norm(Delta[0], 2) * 2.0 * np.exp(0.5 * np.linalg.norm(M[0], 2) * 4.0)
    assert delta_v(model, x) == pytest.approx(expected, rel=1e-13)
    with pytest.raises(ValueError, match="needs the state x"):
        delta_v(model)


def test_bad_input(rng):
    M = random_symmetric(rng, 2, 3)
    with pytest.raises(ValueError, match="'Delta' parameter of misaligned_model: must hold one d x d matrix per head"):
        misaligned_model(M, np.zeros((1, 3, 3)), beta=1.0)
    with pytest.raises(ValueError, match="'Delta' parameter of misaligned_model: must hold one d x d matrix per "
                                         "head, the shape of M"):
        misaligned_model(M, np.zeros((2, 4, 4)), beta=1.0)
    with pytest.raises(ValueError, match=r"M of misaligned_model must be symmetric \(Condition 3"):
        misaligned_model(M + np.triu(np.ones((3, 3)), 1), np.zeros((2, 3, 3)), beta=1.0)
    with pytest.raises(ValueError, match="must have kind in \\['usa'\\]"):
        misalignment_rates(MultiHead(M, beta=1.0, kind="softmax"), sample_uniform(4, d=3, rng=rng))
    with pytest.raises(ValueError, match="'model' parameter of misalignment_fn must be a particles.MultiHead"):
        misalignment_fn(lambda t, x: x)
    with pytest.raises(ValueError, match="x has d = 2 columns"):
        misalignment_rates(misaligned_model(M, 0 * M, beta=1.0), np.eye(2))
