"""Runge–Kutta–Chebyshev: stability polynomial, order, the Jacobian bound of Ensemble, stiff
USA clusters, and trial stages that a field refuses."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from particles import STEPPERS, Ensemble, MultiHead, SaveAt, SolverError, sample_uniform, simulate
from particles._core.sphere import GEOMETRIES
from particles._dynamics.tableaux import _rkc_coefficients, rkc_stages


def _amplification(z, s):
    """R_s(z): one RKC step of y' = λy from y = 1, z = hλ (the stage recursion of the stepper)."""
    mu1, rows = _rkc_coefficients(s)
    prev, y = 1.0, 1.0 + mu1 * z
    for mu, nu, mut, gam, _ in rows:
        prev, y = y, (1 - mu - nu) + mu * y + nu * prev + mut * z * y + gam * z
    return y


@given(st.floats(0.0, 3e4))
@settings(max_examples=300, deadline=None)
def test_stages_chosen_are_stable(h_rho):
    assert abs(_amplification(-h_rho, rkc_stages(h_rho))) <= 1.0 + 1e-12


@pytest.mark.parametrize("s", [2, 3, 7, 40, 200])
def test_second_order_and_last_stage_time(s):
    # R_s(z) = 1 + z + z^2/2 + O(z^3): local error / z^3 tends to a constant (order 2)
    local = [abs(_amplification(-z, s) - np.exp(-z)) / z**3 for z in (1e-2, 5e-3)]
    assert local[0] == pytest.approx(local[1], rel=0.05) and local[0] > 1e-3
    # the stage times rise to 1 along the recursion (the last one evaluated, c_{s-1}, is below 1)
    cs = [row[4] for row in _rkc_coefficients(s)[1]]
    assert np.all(np.diff(cs) > 0) and 0 < cs[-1] < 1


@pytest.mark.parametrize("s_hint", [0.0, 30.0, 3000.0])
def test_stage_times_integrate_time_exactly(s_hint):
    """y' = t + λ·0 on flat space: a second-order step with the right stage times c_j gives
    y(h) = h²/2 exactly, whatever the stage count (wrong c_j, e.g. all zero, give 0)."""

    class Clock:
        geometry, geom = "flat", GEOMETRIES["flat"]

        def spectral_radius(self, t, x):
            return s_hint  # 2, 7 or 68 stages at h = 1

        def __call__(self, t, x):
            return np.full_like(x, t)

    y, _ = STEPPERS["rkc"](Clock(), 0.0, np.zeros((1, 1)), 1.0, GEOMETRIES["flat"])
    assert y[0, 0] == pytest.approx(0.5, abs=1e-12)


def test_global_order_two_on_skew_flow(rng):
    """One token under a skew value matrix: x(t) = expm(tW) x0; fixed steps of the RKC step
    (spectral radius by power iteration: MultiHead has no bound) halve dt, error / 4."""
    from scipy.linalg import expm

    A = rng.standard_normal((4, 4))
    W = A - A.T
    model, x0 = MultiHead(np.eye(4), W, beta=1.0, kind="softmax"), sample_uniform(1, d=4, rng=rng)
    geom, exact = GEOMETRIES["sphere"], expm(W) @ x0[0]
    errs = []
    for k in (20, 40, 80):
        x = x0.copy()
        for i in range(k):
            x, _ = STEPPERS["rkc"](model, i / k, x, 1.0 / k, geom)
        errs.append(np.linalg.norm(x[0] - exact))
    ratios = np.array(errs[:-1]) / np.array(errs[1:])
    assert np.all((ratios > 3.4) & (ratios < 4.6)), ratios


def _jacobian(ens, x, h=1e-6):
    """Central differences of the (ambient) velocity of one system, (nd, nd)."""
    n, d = x.shape[1:]
    J = np.empty((n * d, n * d))
    for k in range(n * d):
        e = np.zeros(n * d)
        e[k] = h
        e = e.reshape(1, n, d)
        J[:, k] = ((ens._velocity(x + e) - ens._velocity(x - e)) / (2 * h)).ravel()
    return J


@given(kind=st.sampled_from(["usa", "softmax"]), beta=st.floats(0.0, 6.0), seed=st.integers(0, 2**31),
       heads=st.lists(st.tuples(st.floats(-1.5, 1.5), st.floats(-1.5, 1.5)), min_size=1, max_size=2),
       clustered=st.booleans())
@settings(max_examples=40, deadline=None)
def test_spectral_radius_bounds_the_jacobian(kind, beta, seed, heads, clustered):
    r = np.random.default_rng(seed)
    n, d = 5, 3
    x = r.standard_normal((1, n, d)) + (4.0 * np.array([1.0, 0, 0]) if clustered else 0.0)
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    M = np.stack([m * np.eye(d) for m, _ in heads])
    W = np.stack([w * np.eye(d) for _, w in heads])
    ens = Ensemble(M, W, beta=[beta], kind=kind)
    true = np.max(np.abs(np.linalg.eigvals(_jacobian(ens, x))))
    assert ens.spectral_radius(0.0, x) >= true * (1 - 1e-6) - 1e-7


def test_spectral_radius_of_a_tight_cluster_is_near_its_contraction_rate():
    """m coincident-ish USA tokens: the Jacobian's radius is e^beta m/n, the tangent contraction
    (the USA field depends on the directions only: no normal contraction 2 e^beta m/n), the
    bound 3 e^beta m/n: stiff but only 3x over."""
    x = np.array([[1.0, 1e-4, 0.0], [1.0, -1e-4, 0.0], [1.0, 0.0, 1e-4], [1.0, 0.0, -1e-4]])[None]
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    ens = Ensemble(np.eye(3), beta=[8.0], kind="usa")
    true = np.max(np.abs(np.linalg.eigvals(_jacobian(ens, x, h=1e-8))))
    bound = ens.spectral_radius(0.0, x)
    assert true == pytest.approx(np.exp(8.0), rel=1e-3)
    assert bound == pytest.approx(3 * true, rel=1e-3)


def test_stiff_usa_system_fewer_evaluations_than_dopri5_same_answer(rng):
    """One n = 32 USA system at beta = 9 in d = 8 over T = 1 (clusters contract at ~e^9 m/n):
    at the same tolerance rkc needs fewer than 0.7x the evaluations of dopri5, and both agree with
    a tight dopri5 reference to the tolerance's scale."""
    x0 = sample_uniform(32, d=8, rng=rng)[None]
    ts = np.linspace(0.0, 1.0, 11)
    runs = {}
    for method, rtol in (("dopri5", 1e-10), ("dopri5", 1e-5), ("rkc", 1e-5)):
        field = Ensemble(np.eye(8), beta=[9.0], kind="usa").settling(1e-12)
        traj = simulate(x0, field, t1=1.0, dt=1e-4, method=method, rtol=rtol, atol=rtol * 1e-2,
                        save=SaveAt(ts=ts))
        runs[method, rtol] = (traj.x, field.system_evaluations)
    ref = runs["dopri5", 1e-10][0]
    for key in (("dopri5", 1e-5), ("rkc", 1e-5)):
        assert np.abs(runs[key][0] - ref).max() < 1e-2, key
    assert runs["rkc", 1e-5][1] < 0.7 * runs["dopri5", 1e-5][1]


def test_settled_systems_do_not_count_in_the_radius():
    th = np.array([[0.0, 1e-5, 2e-5], [0.0, 0.3, np.pi]])
    x = np.stack([np.cos(th), np.sin(th)], -1)
    field = Ensemble(np.eye(2), beta=[9.0, 1.0], kind="usa").settling(1e-3)
    full = field.spectral_radius(0.0, x)
    field.after_step(0.0, x)  # certifies system 0 (all tokens within 2e-5)
    assert field.settled_at.tolist() == [0.0, np.inf]
    assert field.spectral_radius(0.0, x) < 0.01 * full
    field._running = np.array([], dtype=int)
    assert field.spectral_radius(0.0, x) == 0.0


@pytest.mark.parametrize("method", ["dopri5", "rkc"])
def test_trial_stage_refused_by_the_field_rejects_the_step(method):
    """A field that raises SolverError off the sphere (as Ensemble's USA overflow check does on a
    far-too-long trial stage) makes the adaptive step reject the trial, not end the run."""
    W = np.array([[0.0, -1.0], [1.0, 0.0]])

    def rotation(t, x):
        if np.abs(np.linalg.norm(x, axis=-1) - 1).max() > 0.5:
            raise SolverError("stage far off the sphere")
        return x @ W.T

    x0 = np.array([[1.0, 0.0]])
    traj = simulate(x0, rotation, t1=2.0, dt=50.0, method=method, rtol=1e-6, atol=1e-8)
    assert traj.success and traj.n_rejected >= 1
    np.testing.assert_allclose(traj.x[-1, 0], [np.cos(2.0), np.sin(2.0)], atol=1e-3)


def test_failure_at_the_accepted_state_is_raised():
    def broken(t, x):
        raise SolverError("the flow itself overflows")

    with pytest.raises(SolverError, match="flow itself"):
        simulate(np.array([[1.0, 0.0]]), broken, t1=1.0, method="rkc")
