"""Hints that name the real fault, and no silent results: shape before norm, a trajectory labelled
only with its own model, a fixed step longer than the run refused."""

import numpy as np
import pytest

import metrics
import particles
from particles import InvalidParameterError


def _model(**kw):
    return particles.MultiHead.scalar([1.0, 0.5], d=3, **{"beta": 2.0, "kind": "usa", **kw})


def test_transposed_state_is_named_before_the_norm():
    """(3, 50) points: the shape is the fault (50 columns against 3 x 3 heads), not the norms."""
    x0 = particles.sample_uniform(50, d=3, rng=0)
    with pytest.raises(InvalidParameterError, match=r"d = 50 columns .* 3 x 3.* transposed: pass x0\.T"):
        particles.simulate(x0.T, _model(), t1=1.0, dt=0.1)
    with pytest.raises(InvalidParameterError, match="unit sphere"):
        particles.simulate(2 * x0, _model(), t1=1.0, dt=0.1)


def test_trajectory_remembers_its_model():
    model = _model(kind="softmax")
    traj = particles.simulate(particles.sample_uniform(8, d=3, rng=1), model, t1=0.2, dt=0.1)
    assert traj.fingerprint == particles.extend.field_fingerprint(model) != ""
    ds = metrics.trajectory_to_dataset(traj, model.replace(beta=2.0))  # an equal model is the same model
    assert ds.attrs["kind"] == "softmax"
    other = particles.MultiHead.scalar([1.0], d=3, beta=9.0, kind="usa")
    with pytest.raises(InvalidParameterError, match="not the model that was simulated"):
        metrics.trajectory_to_dataset(traj, other)
    with pytest.raises(InvalidParameterError, match="not the model that was simulated"):
        metrics.trajectory_to_dataset(traj, model.replace(beta=2.5))
    assert "kind" not in metrics.trajectory_to_dataset(traj).attrs  # no model: nothing claimed


def test_fixed_step_longer_than_the_run_is_refused():
    x0 = particles.sample_uniform(8, d=3, rng=2)
    with pytest.raises(InvalidParameterError, match=r"dt = 2 of simulate is longer than the run t1 - t0 = 1"):
        particles.simulate(x0, _model(), t1=1.0, dt=2.0, method="euler")
    # an adaptive method takes dt as its first trial step: the controller shortens it
    traj = particles.simulate(x0, _model(), t1=1.0, dt=2.0, method="dopri5")
    assert traj.status == "finished" and traj.t[-1] == 1.0


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_low_precision_points_are_told_to_cast_not_to_normalise(dtype):
    """float32 tokens normalised in float32 are still off the sphere by ~1e-7: the hint says to cast
    to float64 first (normalising again, the old hint, cannot help)."""
    x = particles.sample_uniform(16, d=3, rng=3).astype(dtype)
    x /= np.linalg.norm(x, axis=-1, keepdims=True)   # the old hint, followed
    name = np.dtype(dtype).name
    for call in (lambda: particles.simulate(x, _model(), t1=0.2, dt=0.1),
                 lambda: particles.geodesic_distance(x, x),
                 lambda: particles.simulate(x[None], particles.Ensemble(np.eye(3)[None], beta=[1.0]), t1=0.2, dt=0.1)):
        with pytest.raises(InvalidParameterError, match=rf"is {name} .* cast it first, .*dtype=np\.float64"):
            call()
    # a float64 array off the sphere keeps the plain hint, and the cast-and-normalise fix works
    with pytest.raises(InvalidParameterError, match=r"use x0 / np\.linalg\.norm") as err:
        particles.simulate(2.0 * x.astype(np.float64), _model(), t1=0.2, dt=0.1)
    assert "cast" not in str(err.value)
    y = np.asarray(x, dtype=np.float64)
    y /= np.linalg.norm(y, axis=-1, keepdims=True)
    assert particles.simulate(y, _model(), t1=0.2, dt=0.1).status == "finished"


def test_kappa_zero_is_explained_as_infinite_noise():
    """kappa = 0 written for "no noise": every noisy entry point says that inf is noiseless."""
    import meanfield as mf

    x0 = particles.sample_uniform(8, d=3, rng=4)
    calls = [lambda: particles.simulate(x0, _model(), t1=0.2, dt=0.1, method="euler_maruyama", kappa=0.0),
             lambda: mf.wasserstein_ascent(mf.EmpiricalMeasure(x0), _model(), t1=0.2, dt=0.1, kappa=0.0),
             lambda: mf.uniform_growth_rate(1.0, lam=2.0, kappa=0.0),
             lambda: metrics.run_sweep({"beta": [1.0]}, n_seeds=1, t1=0.2, dt=0.1, n_saves=2, kappa=0.0)]
    for call in calls:
        with pytest.raises(InvalidParameterError, match=r"inverse noise strength.*np\.inf .* is noiseless"):
            call()


def test_an_overflowing_run_fails_with_its_reason_not_with_numpy_warnings():
    """USA heads at beta = 400 overflow in physical time: the run stops with the fix
    (log_time_scale='auto'); the overflow inside the step is not a RuntimeWarning (here an error)."""
    model = particles.MultiHead.scalar([1.0, 0.4], d=3, beta=400.0, kind="usa")
    x0 = particles.sample_uniform(32, d=3, rng=0)
    # (the step is also far beyond any stability interval at the consensus rate e^400: a StabilityWarning first)
    with pytest.warns(particles.StabilityWarning, match="log_time_scale='auto'"):
        traj = particles.simulate(x0, model, t1=1.0, dt=0.02, method="rk4", on_failure="return")
    assert traj.status == "failed" and "log_time_scale='auto'" in traj.message
    assert np.all(np.isfinite(traj.x_final))
    with pytest.raises(particles.SolverError, match="log_time_scale=.auto."), pytest.warns(particles.StabilityWarning):
        particles.simulate(x0, model, t1=1.0, dt=0.02, method="euler")


def test_n_and_d_swapped_at_creation_is_not_called_transposed():
    """sample_uniform(3, d=64): 3 unit rows in R^64; "pass x0.T" would give rows that are not unit."""
    x = particles.sample_uniform(3, d=64, rng=5)
    swapped = r"its 3 rows are unit vectors in R\^64: were n and d swapped"
    with pytest.raises(InvalidParameterError, match=swapped) as err:
        particles.simulate(x, _model(), t1=0.2, dt=0.1)
    assert "pass x0.T" not in str(err.value)


def test_an_unseeded_noisy_run_keeps_the_entropy_that_repeats_it():
    """rng=None with noise used to draw unrecorded entropy: the run could not be repeated."""
    model, x0 = _model(), particles.sample_uniform(8, d=3, rng=6)
    first = particles.simulate(x0, model, t1=0.3, dt=0.1, method="euler_maruyama", kappa=5.0)
    assert first.noise_entropy.isdigit()
    again = particles.simulate(x0, model, t1=0.3, dt=0.1, method="euler_maruyama", kappa=5.0,
                               rng=int(first.noise_entropy))
    np.testing.assert_array_equal(again.x_final, first.x_final)
    assert again.noise_entropy == ""  # a seeded run: the caller holds the seed
    assert metrics.trajectory_to_dataset(first, model).attrs["noise_entropy"] == first.noise_entropy
    assert particles.simulate(x0, model, t1=0.3, dt=0.1).noise_entropy == ""  # no noise, nothing to keep


def test_a_relative_tolerance_below_round_off_is_refused():
    """rtol=1e-20 used to run ~60 000 dopri5 steps (1e-12: 57) for nothing float64 can resolve."""
    x0 = particles.sample_uniform(8, d=3, rng=7)
    with pytest.raises(InvalidParameterError, match=r"'rtol' parameter of simulate .* round-off is 2\.2e-16"):
        particles.simulate(x0, _model(), t1=0.5, method="dopri5", rtol=1e-20)
    assert particles.simulate(x0, _model(), t1=0.5, method="dopri5", rtol=1e-15).status == "finished"


def test_noise_larger_than_a_step_may_move_is_refused_up_front():
    """kappa = 1e-3, dt = 0.01: sqrt(2 dt / kappa) = 4.5 rad per step; every step used to be refused
    as unresolved, with a hint (method='dopri5') that a noisy run cannot take."""
    x0 = particles.sample_uniform(8, d=3, rng=8)
    too_noisy = r"kappa = 0\.001 with dt = 0\.01: .* sqrt\(2 dt / kappa\) = 4\.47 rad"
    with pytest.raises(InvalidParameterError, match=too_noisy):
        particles.simulate(x0, _model(), t1=0.1, dt=0.01, method="euler_maruyama", kappa=1e-3)
    traj = particles.simulate(x0, _model(), t1=0.1, dt=0.01, method="euler_maruyama", kappa=1.0, rng=0)
    assert traj.status == "finished"


def test_a_method_that_converts_first_still_says_cast_for_float32_norms():
    """MultiHead's methods convert the state to float64 before its sphere check (the dtype is gone): a
    deviation of float32 size (< 1e-6) still gets the cast; a large one keeps the plain hint."""
    model = _model()
    x = particles.sample_uniform(16, d=3, rng=5).astype(np.float32)
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    for call in (lambda: model.velocity(x), lambda: model.energy(x), lambda: model.entropy(x)):
        with pytest.raises(InvalidParameterError, match=r"normalised in float32\? cast to float64 first"):
            call()
    with pytest.raises(InvalidParameterError, match=r"use x / np\.linalg\.norm") as err:
        model.velocity(2.0 * x.astype(np.float64))
    assert "float32" not in str(err.value)
