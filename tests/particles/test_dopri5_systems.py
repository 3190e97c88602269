"""dopri5_systems: one adaptive step per system of a stack, landing on the outer targets."""

import numpy as np
import pytest
from scipy.linalg import expm

from particles import Ensemble, MultiHead, SaveAt, sample_uniform, simulate


def _stack(rng, S=6, n=12, d=4):
    x = rng.standard_normal((S, n, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_agrees_with_a_tight_reference(rng):
    x0 = _stack(rng)
    betas = np.linspace(0.5, 6.0, x0.shape[0])
    ts = np.linspace(0.0, 1.0, 6)
    ref = simulate(x0, Ensemble(np.eye(4), beta=betas, kind="usa"), t1=1.0, method="dopri5", rtol=1e-12,
                   atol=1e-14, save=SaveAt(ts=ts)).x
    for tol in (1e-6, 1e-9):
        got = simulate(x0, Ensemble(np.eye(4), beta=betas, kind="usa"), t1=1.0, dt=1e-3, method="dopri5_systems",
                       rtol=tol, atol=tol * 1e-2, save=SaveAt(ts=ts))
        assert got.success and got.t.tolist() == ts.tolist()
        assert np.abs(got.x - ref).max() < 300 * tol
        assert np.abs(np.linalg.norm(got.x, axis=-1) - 1).max() < 1e-13


def test_a_system_does_not_depend_on_its_companions(rng):
    """Each system takes its own steps: run in a stack or alone, its path is the same (to round-off
    of the batched arithmetic), while a shared dopri5 step makes it depend on the fastest system."""
    x0 = _stack(rng)
    betas = np.array([0.5, 1.0, 2.0, 4.0, 6.0, 8.0])
    together = simulate(x0, Ensemble(np.eye(4), beta=betas, kind="usa"), t1=1.0, dt=1e-3,
                        method="dopri5_systems", rtol=1e-7).x[-1]
    for s in (0, 3):
        alone = simulate(x0[s:s + 1], Ensemble(np.eye(4), beta=betas[s:s + 1], kind="usa"), t1=1.0, dt=1e-3,
                         method="dopri5_systems", rtol=1e-7).x[-1, 0]
        np.testing.assert_allclose(together[s], alone, atol=1e-12)


def test_fewer_evaluations_than_a_shared_step_same_clusters(rng):
    """Systems at beta = 0.5 .. 8 (USA, T = 1): the slow ones no longer take the fast one's steps."""
    x0 = _stack(rng, S=16, n=16, d=6)
    betas = np.linspace(0.5, 8.0, 16)
    runs = {}
    for method in ("dopri5", "dopri5_systems"):
        field = Ensemble(np.eye(6), beta=betas, kind="usa").settling(0.04)
        traj = simulate(x0, field, t1=1.0, dt=1e-4, method=method, rtol=1e-6, atol=1e-8)
        G = traj.x[-1] @ traj.x[-1].transpose(0, 2, 1)
        runs[method] = (np.count_nonzero(G >= 0.999, axis=(1, 2)), field.system_evaluations)
    np.testing.assert_array_equal(runs["dopri5"][0], runs["dopri5_systems"][0])
    assert runs["dopri5_systems"][1] < 0.6 * runs["dopri5"][1]


def test_settled_systems_stay_and_cost_nothing(rng):
    th = np.array([[0.0, 1e-5, 2e-5, 3e-5], [0.0, 0.5, 2.0, 4.0]])
    x0 = np.stack([np.cos(th), np.sin(th)], -1)
    field = Ensemble(np.eye(2), beta=[3.0, 3.0], kind="usa").settling(1e-3)
    traj = simulate(x0, field, t1=2.0, dt=1e-2, method="dopri5_systems", rtol=1e-8, save=SaveAt(ts=[0.0, 1.0, 2.0]))
    assert field.settled_at[0] == 0.0 and np.isinf(field.settled_at[1])
    np.testing.assert_allclose(traj.x[-1, 0], x0[0], atol=1e-15)
    assert np.abs(traj.x[-1, 1] - x0[1]).max() > 1e-3
    # the settled system costs nothing: the work is that of the other system run alone
    alone = Ensemble(np.eye(2), beta=[3.0], kind="usa").settling(1e-3)
    simulate(x0[1:], alone, t1=2.0, dt=1e-2, method="dopri5_systems", rtol=1e-8, save=SaveAt(ts=[0.0, 1.0, 2.0]))
    assert field.system_evaluations == alone.system_evaluations


def test_one_system_field_without_systems_is_dopri5(rng):
    """A MultiHead (no systems(idx)) is one system: the skew flow x(t) = expm(tW) x0 to tolerance."""
    A = rng.standard_normal((4, 4))
    W = A - A.T
    x0 = sample_uniform(1, d=4, rng=rng)
    model = MultiHead(np.eye(4), W, beta=1.0, kind="softmax")
    traj = simulate(x0, model, t1=1.5, dt=1e-3, method="dopri5_systems", rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(traj.x[-1, 0], expm(1.5 * W) @ x0[0], atol=1e-9)


def test_time_dependent_field_gets_the_inner_times(rng):
    """x' = P_x(c(t) W x) with c(t) = cos t: x(T) = expm(sin(T) W) x0 needs the stage times."""
    A = rng.standard_normal((3, 3))
    W = A - A.T
    x0 = sample_uniform(1, d=3, rng=rng)

    def field(t, x):
        return np.cos(t) * x @ W.T

    traj = simulate(x0, field, t1=2.0, dt=1e-3, method="dopri5_systems", rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(traj.x[-1, 0], expm(np.sin(2.0) * W) @ x0[0], atol=1e-8)


@pytest.mark.parametrize("S", [1, 5])
def test_lands_on_every_save_time(rng, S):
    x0 = _stack(rng, S=S)
    ts = [0.0, 0.013, 0.5, 0.77, 1.0]
    traj = simulate(x0, Ensemble(np.eye(4), beta=np.full(S, 2.0), kind="softmax"), t1=1.0, dt=0.01,
                    method="dopri5_systems", save=SaveAt(ts=ts))
    assert traj.t.tolist() == ts and traj.x.shape == (5, S, 12, 4)


def test_dense_output_is_the_step_at_its_ends_and_fourth_order_inside():
    """Shampine's interpolant: theta = 1 gives the fifth-order solution (rows sum to b5), its
    slope at theta = 0 is the first stage, and mid-step its error on x' = Ax is O(h^5)."""
    from particles._core.sphere import GEOMETRIES
    from particles._dynamics.per_system import _Carry
    from particles._dynamics.tableaux import DORMAND_PRINCE, DP_DENSE, dp_stages

    np.testing.assert_allclose(DP_DENSE.sum(axis=1), DORMAND_PRINCE.b, atol=1e-15)
    np.testing.assert_array_equal(DP_DENSE[:, 0], np.eye(7)[0])
    A = np.array([[-1.0, 2.0], [-2.0, -0.5]])
    x0 = np.array([[[1.0, 0.3]]])  # one system of one token in the plane

    def f(t, x):
        return x @ A.T

    errors = []
    for h in (0.4, 0.2):
        y5, _, K = dp_stages(f, x0, h, f(0.0, x0), lambda c, h=h: c * h)
        carry = _Carry(0.0, x0, np.array([h]))
        carry.seg_h[:], carry.seg_k[:] = h, K
        mid = carry.interpolate(h / 2, GEOMETRIES["flat"])
        errors.append(np.abs(mid[0, 0] - expm(A * h / 2) @ x0[0, 0]).max())
        np.testing.assert_allclose(carry.interpolate(h, GEOMETRIES["flat"]), y5, rtol=1e-14)
    assert 20 < errors[0] / errors[1] < 50  # 2^5 = 32


def test_steps_cross_save_times_without_evaluations(rng):
    """A slow system saved at 101 times: its steps span many of them (a target inside a step costs
    no evaluation, its state there is interpolated) and every saved state keeps the tolerance."""
    x0 = _stack(rng, S=2)
    betas = np.array([0.5, 1.0])
    ts = np.linspace(0.0, 1.0, 101)
    ref = simulate(x0, Ensemble(np.eye(4), beta=betas, kind="usa"), t1=1.0, method="dopri5", rtol=1e-12,
                   atol=1e-14, save=SaveAt(ts=ts)).x
    field = Ensemble(np.eye(4), beta=betas, kind="usa").settling(1e-3)
    got = simulate(x0, field, t1=1.0, dt=1e-3, method="dopri5_systems", rtol=1e-8, atol=1e-10, save=SaveAt(ts=ts))
    assert np.abs(got.x - ref).max() < 1e-6
    assert np.abs(np.linalg.norm(got.x, axis=-1) - 1).max() < 1e-13
    assert field.system_evaluations < 2 * 6 * 100 / 3  # landing on every save time: >= 2 x 6 x 100


def test_a_second_run_of_the_same_field_starts_afresh(rng):
    """The carried steps belong to one run: the same field run on x0, then x1, then x0 again gives
    the runs of fresh fields (to the step sizes it starts from: within tolerance)."""
    x0, x1 = _stack(rng, S=3), _stack(rng, S=3)

    def run(field, x):
        return simulate(x, field, t1=0.5, dt=1e-3, method="dopri5_systems", rtol=1e-9, atol=1e-11,
                        save=SaveAt(ts=[0.0, 0.25, 0.5])).x

    def fresh():
        return Ensemble(np.eye(4), beta=[1.0, 3.0, 5.0], kind="usa")

    field = fresh()
    first, second, third = run(field, x0), run(field, x1), run(field, x0)
    np.testing.assert_allclose(second, run(fresh(), x1), atol=1e-7)
    np.testing.assert_allclose(third, first, atol=1e-7)
    assert np.abs(third - run(fresh(), x1)).max() > 0.1
