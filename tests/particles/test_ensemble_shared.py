"""The shared pass of softmax heads of one score direction (M_h = m_h I, m_h > 0): equal to the heads' own passes
to round-off, its powers of E equal to the heads' own exps (underflow included), and where it does not apply."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import metrics
from particles import Ensemble, MultiHead, simulate
from particles._core.blocking import Workspace
from particles._model import ensemble as ensemble_module
from particles._model.ensemble_shared import SHIFT_ABOVE, share_heads, shared_heads

STRENGTHS = [(0.5, 1.0, 2.0), (1.0, 2.0, 3.0, 4.0), (0.3, 0.9), (1.0, 1.0, 2.0), (0.25, 0.7, 8.0), (1.0, 16.0)]


def _tokens(rng, S, n, d, spread=0.0):
    x = rng.standard_normal((S, n, d))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    return x * (1.0 + spread * rng.uniform(-1, 1, (S, n, 1)))  # spread > 0: off the sphere, as an RK4 stage


def _per_head(M, W, beta, x, **kw):
    """The sum of the heads' own passes: one one-head Ensemble per head (the shared pass needs two heads)."""
    return sum(Ensemble(M[h:h + 1], W[h:h + 1], beta=beta)._velocity(x, **kw) for h in range(M.shape[0]))


def _heads(lambdas, d, values=None):
    M = np.asarray(lambdas, float)[:, None, None] * np.eye(d)[None]
    W = M if values is None else np.asarray(values, float)[:, None, None] * np.eye(d)[None]
    return M, W


def test_the_plan_of_the_heads():
    plan = share_heads([(0.5, 0.5), (1.0, 1.0), (2.0, 2.0)], True)
    assert plan.base == 0.5 and plan.ratios == (1.0, 2.0, 4.0) and plan.values == (0.5, 1.0, 2.0)
    assert plan.recipe == (("exp",), ("mul", 0, 0), ("mul", 1, 1))  # E^2 = E E, E^4 = E^2 E^2: no exp
    assert plan.n_exps == 1 and Ensemble(_heads((0.5, 1.0, 2.0), 3)[0], beta=[1.0]).exps_per_evaluation(4) == 16
    assert Ensemble(_heads((0.3, 0.9), 3)[0], beta=[1.0]).exps_per_evaluation(4) == 32
    assert share_heads([(1.0, 1.0), (2.0, 1.0), (3.0, 1.0)], True).recipe == (("exp",), ("mul", 0, 0), ("mul", 1, 0))
    assert share_heads([(0.3, 1.0), (0.9, 1.0)], True).recipe == (("exp",), ("exp",))  # 3 = no sum of formed powers
    assert share_heads([(1.0, 1.0), (20.0, 1.0)], True).recipe == (("exp",), ("exp",))  # past MAX_POWER
    assert share_heads([(1.0, 0.5), (1.0, 2.0), (2.0, 1.0)], True).values == (2.5, 1.0)  # equal strengths add up
    # where it does not apply: one head, a kind whose output is no attention mean, a strength <= 0
    assert share_heads([(1.0, 1.0)], True) is None and share_heads([(1.0, 1.0), (2.0, 1.0)], False) is None
    assert share_heads([(1.0, 1.0), (-2.0, 1.0)], True) is None and share_heads([(0.0, 1.0), (2.0, 1.0)], True) is None


def test_route_by_the_model():
    M, W = _heads((0.5, 1.0, 2.0), 5)
    assert Ensemble(M, W, beta=[1.0])._shared is not None
    assert Ensemble(M, W, beta=[1.0], kind="usa")._shared is None  # the partition-scaled output: its own passes
    assert Ensemble(M, W, beta=[1.0], kind="relu")._shared is None
    assert Ensemble(M * np.array([1, -1, 1])[:, None, None], W, beta=[1.0])._shared is None
    assert Ensemble(np.stack([M[0], np.diag(np.arange(1.0, 6.0))]), beta=[1.0])._shared is None  # not scalar


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), S=st.integers(1, 4), n=st.integers(1, 12), d=st.sampled_from([2, 3, 5, 16]),
       lambdas=st.sampled_from(STRENGTHS), beta_top=st.sampled_from([1.0, 10.0, 300.0, 5000.0]),
       spread=st.sampled_from([0.0, 0.05]), signed=st.booleans())
def test_shared_pass_equals_the_heads_own_passes(seed, S, n, d, lambdas, beta_top, spread, signed):
    rng = np.random.default_rng(seed)
    values = rng.uniform(-2, 2, len(lambdas)) if signed else None
    M, W = _heads(lambdas, d, values)
    beta = rng.uniform(0, beta_top, S)
    x = _tokens(rng, S, n, d, spread)
    ens = Ensemble(M, W, beta=beta, chunk=3)
    assert ens._shared is not None
    v, ref = ens._velocity(x), _per_head(M, W, beta, x)
    assert np.all(np.isfinite(v))
    np.testing.assert_allclose(v, ref, rtol=0, atol=5e-14 * max(1.0, np.abs(ref).max()))


@pytest.mark.parametrize("lambdas", STRENGTHS[:3])
def test_merged_tokens_weighted_as_their_groups(rng, lambdas):
    M, W = _heads(lambdas, 6)
    beta, x = np.array([0.5, 4.0, 40.0]), _tokens(rng, 3, 8, 6)
    weights = rng.integers(0, 4, (3, 8)).astype(float)
    weights[:, 0] = 1.0  # a token of positive mass in every system (as merging's representatives)
    v = Ensemble(M, W, beta=beta)._velocity(x, weights=weights, n=20)
    np.testing.assert_allclose(v, _per_head(M, W, beta, x, weights=weights, n=20), rtol=0, atol=5e-14)


def test_equal_to_one_model_per_system(rng):
    M, W = _heads((0.5, 1.0, 2.0), 7)
    beta, x = np.array([0.0, 0.7, 9.0, 2000.0]), _tokens(rng, 4, 9, 7)
    v = Ensemble(M, W, beta=beta).velocity(x)
    for s, b in enumerate(beta):
        ref = MultiHead(M, W, beta=b, kind="softmax", summation="exact").velocity(x[s])
        np.testing.assert_allclose(v[s], ref, rtol=1e-11, atol=1e-12 * max(1.0, np.abs(ref).max()))


@pytest.mark.parametrize("lambdas", [(0.5, 1.0, 2.0), (1.0, 2.0, 3.0, 4.0), (0.3, 0.9)])
@pytest.mark.parametrize("beta", [1.0, 50.0, 400.0, 3000.0])
def test_powers_equal_the_heads_own_exps(rng, lambdas, beta):
    """E^k (products of formed powers) against the head's own exp of its logits beta m_h <x_i, x_j>, shifted by
    beta m_h c where the largest logit could overflow (SHIFT_ABOVE; unshifted below: the row normalisation cancels
    the factor): relative error a few ulp of the terms of the argument (each is rounded to eps beta m_h
    max(|G_ij|, c) in both), and the same underflow to 0 (to the smallest normal number) at large beta."""
    S, n, d = 3, 10, 5
    x = _tokens(rng, S, n, d, 0.02)
    plan = share_heads([(m, 1.0) for m in lambdas], True)
    work, b = Workspace(), np.full(S, beta)
    shared_heads(x, b, plan, work)
    E = work.get("shared_E", (len(plan.ratios), S, n, n))
    c = np.einsum("snd,snd->sn", x, x).max(axis=1)[:, None, None]
    shifted = plan.ratios[-1] * beta * plan.base * c.max() > SHIFT_ABOVE
    assert shifted == (beta >= 400.0)  # both cases are exercised
    tiny = np.finfo(float).tiny
    for h, k in enumerate(plan.ratios):
        a = beta * plan.base * k  # the head's own pass: its scaled tokens' GEMM, minus its shift
        ref = np.exp((x * a) @ x.transpose(0, 2, 1) - (a * c if shifted else 0.0))
        terms = a * np.maximum(np.abs(x @ x.transpose(0, 2, 1)), c)
        normal, err = ref > tiny, np.abs(E[h] - ref)
        assert np.all(err[normal] <= 8 * np.finfo(float).eps * (1 + terms[normal]) * ref[normal])
        assert np.all(err[~normal] <= tiny)  # underflow: 0 or a subnormal in both
        assert not np.any(np.isnan(E[h]))
    if beta * max(lambdas) >= 800.0:  # a(G - c) reaches -2a < -745 for near-opposite tokens
        assert np.any(E[-1] == 0.0)  # the case of entries that underflow is exercised


def test_declines_where_a_row_underflows_under_the_shift():
    """Flat tokens of very different norms: rows of the short tokens underflow under the system's shift; the pass
    declines and the heads' own passes redo those rows with their exact maxima."""
    d = 4
    M, W = _heads((1.0, 2.0), d)
    x = np.zeros((1, 3, d))
    x[0, 0, 0], x[0, 1, 1], x[0, 2, :2] = 30.0, 1.0, (0.6, 0.8)
    ens = Ensemble(M, W, beta=[2.0], geometry="flat")
    assert shared_heads(x, np.array([2.0]), ens._shared, Workspace()) is None
    v = ens.velocity(x)
    ref = MultiHead(M, W, beta=2.0, kind="softmax", geometry="flat", summation="exact").velocity(x[0])
    np.testing.assert_allclose(v[0], ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


def test_tokens_stay_on_the_sphere_and_follow_the_heads(rng):
    M, W = _heads((0.5, 1.0, 2.0), 16)
    x0, beta = _tokens(rng, 3, 12, 16), np.array([0.5, 3.0, 8.0])
    traj = simulate(x0, Ensemble(M, W, beta=beta), t1=3.0, dt=0.1, method="rk4", progress=False)
    np.testing.assert_allclose(np.linalg.norm(traj.x, axis=-1), 1.0, atol=1e-13)
    for s, b in enumerate(beta):
        one = simulate(x0[s], MultiHead(M, W, beta=b, kind="softmax"), t1=3.0, dt=0.1, method="rk4", progress=False)
        np.testing.assert_allclose(traj.x[-1, s], one.x[-1], atol=1e-11)


def test_phase_diagram_counts_unchanged(monkeypatch):
    """The three-head phase diagram on a small grid, settling and merging: the same counts with the heads' own
    passes."""
    model = MultiHead.scalar([0.5, 1.0, 2.0], d=16, beta=1.0, kind="softmax")
    run = dict(n=8, t1=6.0, n_systems=6, chunk=4, n_saves=4, dt=0.3, progress=False, merge=1e-6)
    shared = metrics.phase_diagram(model, {"beta": [0.5, 3.0, 8.0]}, **run)
    monkeypatch.setattr(ensemble_module, "share_heads", lambda heads, normalised: None)
    own = metrics.phase_diagram(model, {"beta": [0.5, 3.0, 8.0]}, **run)
    np.testing.assert_array_equal(shared.n_clusters.values, own.n_clusters.values)
    np.testing.assert_array_equal(shared.clustered_pairs.values, own.clustered_pairs.values)
