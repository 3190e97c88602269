"""Settled systems leave the batch: the cap certificate, and runs that drop them change no statistic."""

import numpy as np
import pytest

from metrics import n_clusters_batch
from particles import Ensemble, InvalidParameterError, SaveAt, simulate


def _circle(rng, S, n):
    th = rng.uniform(0, 2 * np.pi, (S, n))
    return np.stack([np.cos(th), np.sin(th)], -1)


@pytest.mark.parametrize("method", ["rk4", "dopri5"])
def test_dropping_settled_systems_keeps_the_cluster_count(rng, method):
    # systems certified inside a cap of diameter < eps are one eps-cluster at T: the run that stops
    # them early gives, system by system, the count of the run that integrates everything to T
    eps, n = 1e-3, 8
    betas = np.repeat([0.2, 1.0, 3.0, 8.0], 6)
    x0 = _circle(rng, betas.size, n)
    ens = Ensemble(np.eye(2), beta=betas)
    kw = dict(t1=25.0, dt=0.5, method=method, save=SaveAt(t0=False))
    full = simulate(x0, ens, **kw).x[-1]
    field = ens.settling(eps)
    out = simulate(x0, field, **kw).x[-1]
    settled = np.isfinite(field.settled_at)
    assert 0 < settled.sum() < betas.size  # some systems stopped early, some ran to T
    assert np.all(field.settled_at[settled] < 25.0)
    np.testing.assert_array_equal(n_clusters_batch(out, eps=eps), n_clusters_batch(full, eps=eps))
    np.testing.assert_array_equal(n_clusters_batch(out[settled], eps=eps), 1.0)
    if method == "rk4":
        # the systems that ran to T took the very steps of the full run; the others did no work after
        np.testing.assert_allclose(out[~settled], full[~settled], atol=1e-12)
        assert field.system_evaluations < betas.size * 50 * 4


def test_settled_systems_stay_where_they_were_certified(rng):
    ens = Ensemble(np.eye(3), beta=[6.0, 6.0])
    x0 = np.array([0, 0, 1.0]) + rng.uniform(-0.01, 0.01, (2, 5, 3)) * np.array([1.0, 1.0, 0.0])
    x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    x0[1, 0] = [1.0, 0.0, 0.0]  # system 1 is spread: it runs
    field = ens.settling(0.1)
    traj = simulate(x0, field, t1=2.0, dt=0.1, save=SaveAt(ts=[0.0, 1.0, 2.0]))
    assert field.settled_at[0] == 0.0
    # a zero step retracts x onto itself
    np.testing.assert_allclose(traj.x[:, 0], np.broadcast_to(x0[0], (3, 5, 3)), atol=1e-15)
    assert not np.allclose(traj.x[-1, 1], x0[1])
    assert field.system_evaluations == 2 * 4 * 20 - 4 * 20  # only system 1 was ever evaluated


def test_without_settling_the_field_is_the_ensemble(rng):
    x0 = _circle(rng, 3, 5)
    ens = Ensemble(np.eye(2), beta=[0.5, 2.0, 6.0])
    field = ens.settling(1e-9)  # nothing settles at this diameter from a spread start
    run = simulate(x0, field, t1=3.3, dt=0.4, method="heun").x[-1]
    np.testing.assert_array_equal(run, simulate(x0, ens, t1=3.3, dt=0.4, method="heun").x[-1])
    assert field.system_evaluations == 3 * 9 * 2 and not np.isfinite(field.settled_at).any()


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
        Ensemble(np.eye(2), -np.eye(2), beta=[1.0]).settling(0.1)
    with pytest.raises(InvalidParameterError, match="diameter"):
        Ensemble(np.eye(2), beta=[1.0]).settling(0.0)
    with pytest.raises(InvalidParameterError, match="check_every"):
        Ensemble(np.eye(2), beta=[1.0]).settling(0.1, check_every=0)


def test_subset_keeps_the_selected_systems(rng):
    ens = Ensemble(np.eye(2), beta=[0.5, 1.0, 2.0])
    x = _circle(rng, 3, 4)
    np.testing.assert_array_equal(ens.subset([True, False, True]).velocity(x[[0, 2]]), ens.velocity(x)[[0, 2]])
    assert ens.subset([2]).beta.tolist() == [2.0]
    with pytest.raises(InvalidParameterError, match="keep"):
        ens.subset([True, False])
