"""Settled systems leave the batch: the cap certificate, and runs that drop them change no statistic."""

import numpy as np
import pytest

from metrics import n_clusters_batch
from particles import Ensemble, InvalidParameterError, SaveAt, simulate, simulate_ensemble


def _circle(rng, S, n):
    th = rng.uniform(0, 2 * np.pi, (S, n))
    return np.stack([np.cos(th), np.sin(th)], -1)


def test_dropping_settled_systems_keeps_the_cluster_count(rng):
    # systems certified inside a cap of diameter < eps are one eps-cluster at T: the run that drops
    # them early gives, system by system, the count of the run that integrates everything to T
    eps, n = 1e-3, 8
    betas = np.repeat([0.2, 1.0, 3.0, 8.0], 6)
    x0 = _circle(rng, betas.size, n)
    ens = Ensemble(np.eye(2), beta=betas)
    full = simulate(x0, ens, t1=25.0, dt=0.5, save=SaveAt(t0=False)).x[-1]
    run = simulate_ensemble(x0, ens, t1=25.0, dt=0.5, settle_diameter=eps)
    assert 0 < run.settled.sum() < betas.size  # some systems left early, some ran to T
    assert np.all(run.t[run.settled] < 25.0) and np.all(run.t[~run.settled] == 25.0)
    np.testing.assert_array_equal(n_clusters_batch(run.x, eps=eps), n_clusters_batch(full, eps=eps))
    np.testing.assert_array_equal(n_clusters_batch(run.x[run.settled], eps=eps), 1.0)
    # the systems that ran to T took the very steps of simulate
    np.testing.assert_allclose(run.x[~run.settled], full[~run.settled], atol=1e-12)
    assert run.system_steps < betas.size * 50


def test_without_settling_it_is_simulate(rng):
    x0 = _circle(rng, 3, 5)
    ens = Ensemble(np.eye(2), beta=[0.5, 2.0, 6.0])
    run = simulate_ensemble(x0, ens, t1=3.3, dt=0.4, method="heun")
    ref = simulate(x0, ens, t1=3.3, dt=0.4, method="heun").x[-1]
    np.testing.assert_allclose(run.x, ref, atol=1e-13)
    assert run.system_steps == 3 * 9 and not run.settled.any()


@pytest.mark.parametrize("kind", ["softmax", "usa", "relu", "relu_rownorm"])
def test_a_certified_cap_is_forward_invariant_for_any_M(rng, kind):
    # W_h = mu_h I (mu_h >= 0), any M: tokens certified within diameter 0.4 stay within it
    d, n = 3, 9
    M = rng.standard_normal((2, d, d))
    W = np.stack([0.5 * np.eye(d), 2.0 * np.eye(d)])
    x0 = np.array([0, 0, 1.0]) + rng.uniform(-0.12, 0.12, (4, n, d)) * np.array([1.0, 1.0, 0.0])
    x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    betas = [0.0, 1.0, 4.0, 10.0] if kind == "softmax" else [0.0, 0.5, 1.0, 2.0]  # unnormalised kinds: rates ~ e^beta
    ens = Ensemble(M, W, beta=betas, kind=kind)
    assert np.all(ens.settled(x0, 0.4))
    traj = simulate(x0, ens, t1=2.0, dt=0.01, save=SaveAt(ts=np.linspace(0, 2, 21)))
    gram = np.einsum("tsid,tsjd->tsij", traj.x, traj.x)
    assert np.arccos(np.clip(gram, -1, 1)).max() < 0.4


def test_settled_needs_its_hypotheses(rng):
    x = _circle(rng, 1, 4)
    with pytest.raises(InvalidParameterError, match="W"):
        Ensemble(np.eye(2), np.array([[0.0, -1.0], [1.0, 0.0]]), beta=[1.0]).settled(x, 0.1)
    with pytest.raises(InvalidParameterError, match="W"):
        Ensemble(np.eye(2), -np.eye(2), beta=[1.0]).settled(x, 0.1)
    with pytest.raises(InvalidParameterError, match="sphere"):
        Ensemble(np.eye(2), beta=[1.0], geometry="flat").settled(x, 0.1)
    with pytest.raises(InvalidParameterError, match="diameter"):
        Ensemble(np.eye(2), beta=[1.0]).settled(x, 4.0)
    with pytest.raises(InvalidParameterError, match="W"):
        simulate_ensemble(x, Ensemble(np.eye(2), -np.eye(2), beta=[1.0]), t1=1.0, dt=0.1, settle_diameter=0.1)
    with pytest.raises(InvalidParameterError, match="method"):
        simulate_ensemble(x, Ensemble(np.eye(2), beta=[1.0]), t1=1.0, dt=0.1, method="dopri5")


def test_subset_keeps_the_selected_systems(rng):
    ens = Ensemble(np.eye(2), beta=[0.5, 1.0, 2.0])
    x = _circle(rng, 3, 4)
    np.testing.assert_array_equal(ens.subset([True, False, True]).velocity(x[[0, 2]]), ens.velocity(x)[[0, 2]])
    assert ens.subset([2]).beta.tolist() == [2.0]
    with pytest.raises(InvalidParameterError, match="keep"):
        ens.subset([True, False])
