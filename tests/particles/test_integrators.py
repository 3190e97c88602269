"""Integrators: exact solutions, convergence orders, sphere invariance, SDE law, failures."""

import numpy as np
import pytest
from scipy.linalg import expm
from scipy.stats import linregress

from particles import STEPPERS, MultiHead, SaveAt, SolverError, sample_uniform, simulate

FIXED = [name for name, s in STEPPERS.items() if not s.adaptive and not s.stochastic]


def skew_problem(rng, d=4, kind="softmax"):
    A = rng.standard_normal((d, d))
    W = A - A.T
    x0 = sample_uniform(1, d=d, rng=rng)
    # one particle: its softmax weight is 1 and P_x(Wx) = Wx, so x(t) = expm(tW) x0
    return MultiHead(np.eye(d), W, beta=1.0, kind=kind), x0, W


@pytest.mark.parametrize("kind", ["softmax", "usa", "relu_rownorm"])
@pytest.mark.parametrize("method", ["rk4", "dopri5"])
def test_one_particle_skew_exact(rng, kind, method):
    model, x0, W = skew_problem(rng, kind=kind)
    if kind == "usa":  # e^{β s_11} = e^{β} rescales time
        W_eff = np.exp(model.beta) * W
    else:
        W_eff = W
    T = 1.5
    traj = simulate(x0, model, t1=T, dt=2e-3, method=method, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(traj.x[-1, 0], expm(T * W_eff) @ x0[0], atol=1e-9)


@pytest.mark.parametrize("method", FIXED)
def test_convergence_order(rng, method):
    model, x0, W = skew_problem(rng)
    T = 1.0
    exact = expm(T * W) @ x0[0]
    dts = 2.0 ** -np.arange(4, 9) if method == "euler" else 2.0 ** -np.arange(2, 6)
    errs = [np.linalg.norm(simulate(x0, model, t1=T, dt=dt, method=method).x[-1, 0] - exact) for dt in dts]
    slope = linregress(np.log(dts), np.log(errs)).slope
    assert slope == pytest.approx(STEPPERS[method].order, abs=0.2)


def test_rk4_order_on_interacting_system(rng):
    """n = 6 softmax tokens: against a dopri5 reference at tol 1e-13, halving dt divides by 16."""
    model = MultiHead(np.eye(3), beta=2.0, kind="softmax")
    x0 = sample_uniform(6, d=3, rng=rng)
    ref = simulate(x0, model, t1=1.0, method="dopri5", rtol=1e-13, atol=1e-15).x[-1]
    errs = [np.abs(simulate(x0, model, t1=1.0, dt=dt).x[-1] - ref).max() for dt in (0.1, 0.05, 0.025)]
    ratios = np.array(errs[:-1]) / np.array(errs[1:])
    assert np.all((ratios > 12) & (ratios < 20))


def test_dopri5_error_tracks_tolerance(rng):
    model, x0, W = skew_problem(rng)
    exact = expm(2.0 * W) @ x0[0]
    errs = [np.linalg.norm(simulate(x0, model, t1=2.0, method="dopri5", rtol=tol, atol=tol).x[-1, 0] - exact)
            for tol in (1e-6, 1e-9, 1e-12)]
    assert errs[2] < 1e-9
    assert errs[0] > errs[1] > errs[2]


@pytest.mark.parametrize("method", sorted(STEPPERS))
def test_tokens_stay_on_sphere_every_step(rng, method):
    model = MultiHead(np.eye(3), beta=4.0, kind="softmax")
    x0 = sample_uniform(20, d=3, rng=rng)
    kw = dict(kappa=5.0, rng=1) if STEPPERS[method].stochastic else {}
    # (dopri5_systems has no common step to save after: it lands on given times)
    save = SaveAt(ts=np.linspace(0.0, 2.0, 41)) if method == "dopri5_systems" else SaveAt(every=1)
    traj = simulate(x0, model, t1=2.0, dt=0.05, method=method, save=save, **kw)
    assert traj.x.dtype == np.float64
    assert np.abs(np.linalg.norm(traj.x, axis=-1) - 1).max() < 1e-12


def test_brownian_motion_on_sphere_correlation():
    """E⟨X_t, X_0⟩ = exp(−(d−1)t/κ) for Brownian motion with generator κ⁻¹Δ (zero drift)."""
    d, kappa, T, n = 3, 2.0, 0.5, 4000
    x0 = np.tile(np.eye(d)[:1], (n, 1))  # n independent walkers: zero drift

    def zero(t, x):
        return np.zeros_like(x)

    traj = simulate(x0, zero, t1=T, dt=1e-3, method="euler_maruyama", kappa=kappa, rng=7)
    c = traj.x[-1] @ x0[0]
    se = c.std(ddof=1) / np.sqrt(n)
    # weak error O(dt) ~ 1e-3 is well below the 4-sigma band
    assert abs(c.mean() - np.exp(-(d - 1) * T / kappa)) < 4 * se + 2e-3


def test_same_seed_same_path(rng):
    model = MultiHead(np.eye(3), beta=1.0, kind="softmax")
    x0 = sample_uniform(5, d=3, rng=rng)
    a = simulate(x0, model, t1=0.5, dt=0.01, method="euler_maruyama", kappa=1.0, rng=3).x[-1]
    b = simulate(x0, model, t1=0.5, dt=0.01, method="euler_maruyama", kappa=1.0, rng=3).x[-1]
    np.testing.assert_array_equal(a, b)


def test_save_times_landed_exactly_and_fn(rng):
    model = MultiHead(np.eye(3), beta=1.0, kind="softmax")
    x0 = sample_uniform(5, d=3, rng=rng)
    ts = [0.0, 0.33, 0.5, 1.0]
    traj = simulate(x0, model, t1=1.0, dt=0.1, save=SaveAt(ts=ts, fn=lambda t, x: {"mean": x.mean(0)}))
    np.testing.assert_array_equal(traj.t, ts)
    assert traj.saved["mean"].shape == (4, 3)
    one = simulate(x0, model, t1=0.33, dt=0.1).x[-1]
    np.testing.assert_allclose(traj.x[1], one, atol=1e-15)


def test_nonfinite_state_raises_or_returns_failed(rng):
    x0 = sample_uniform(4, d=3, rng=rng)

    def field(t, x):
        return np.full_like(x, np.nan) if t > 0.25 else np.zeros_like(x)

    with pytest.raises(SolverError, match="stopped being finite at t="):
        simulate(x0, field, t1=1.0, dt=0.1, method="euler", check_every=1)
    traj = simulate(x0, field, t1=1.0, dt=0.1, method="euler", check_every=1, on_failure="return",
                    save=SaveAt(every=1))
    assert traj.status == "failed" and not traj.success and "finite" in traj.message
    assert np.all(np.isfinite(traj.x)) and traj.t[-1] <= 0.3 + 1e-12
    np.testing.assert_allclose(traj.x_final, x0, atol=1e-15)


def test_max_steps_message(rng):
    model = MultiHead(np.eye(3), beta=1.0, kind="softmax")
    with pytest.raises(SolverError, match="Increase max_steps"):
        simulate(sample_uniform(3, d=3, rng=rng), model, t1=1.0, dt=0.01, max_steps=5)


@pytest.mark.parametrize("d", [3, 6])
def test_a_step_that_jumps_a_token_is_refused(rng, d):
    """USA at beta = 8 without a time rescaling: |v| ~ e^8/n, one Euler step of 0.1 carries a
    token far beyond MAX_MOVE; the loop refuses it instead of retracting a non-solution."""
    from particles import SolverError, StabilityWarning, sample_uniform

    x0 = sample_uniform(8, d=d, rng=rng)
    # (dt = 0.1 is also beyond Euler's stability interval at the consensus rate e^8: warned before the step)
    with pytest.raises(SolverError, match="moved a token by"), pytest.warns(StabilityWarning):
        simulate(x0, MultiHead(np.eye(d), beta=8.0, kind="usa"), t1=1.0, dt=0.1, method="euler")
    ok = simulate(x0, MultiHead(np.eye(d), beta=1.0, kind="usa"), t1=0.2, dt=0.1, method="euler")
    assert ok.success
