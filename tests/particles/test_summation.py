"""The summation layer: fast sums against the exact pass, the honesty of the bound, fallbacks."""

import logging
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from particles import InvalidParameterError, MultiHead, SaveAt, diagnose, sample_uniform, simulate
from particles.summation import DEFAULT_TOL, exp_sums


def clustered(rng, n, d, k=4, spread=0.02):
    """n unit vectors in k tight caps (the normal late state of these flows)."""
    c = sample_uniform(k, d=d, rng=rng)
    x = c[rng.integers(0, k, n)] + spread * rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def rotation2(theta):
    return np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])


def assert_within_bound(BM, x, y=None, w=None, tol=DEFAULT_TOL, on_sphere=True, route=None):
    """Fast sums err by at most their own bound: |Z̃/Z − 1| ≤ η, |mean error| ≤ 2η max|y|."""
    y = x if y is None else y
    exact = exp_sums(BM, x, y, w, summation="exact", on_sphere=on_sphere)
    fast = exp_sums(BM, x, y, w, summation="fast", tol=tol, on_sphere=on_sphere)
    for e, f in zip(exact, fast):
        assert f.method != "exact" and (route is None or f.method == route)
        assert 0 < f.bound <= tol
        relz = np.max(np.abs(np.expm1(f.logz - e.logz)))
        assert relz <= f.bound
        ymax = np.max(np.linalg.norm(y, axis=1))
        assert np.max(np.abs(f.mean - e.mean)) <= 2 * f.bound * ymax
    return exact, fast


@pytest.mark.parametrize("beta", [0.1, 1.0, 10.0, 100.0])
@pytest.mark.parametrize("state", ["uniform", "clustered"])
def test_circle_route_heads_mixed(rng, beta, state):
    # scalar heads of both signs and a scaled rotation: all conformal, one shared type-1 transform
    n = 1500
    x = sample_uniform(n, d=2, rng=rng) if state == "uniform" else clustered(rng, n, 2)
    heads = [np.eye(2), 0.7 * np.eye(2)]
    if state == "uniform":
        # a negative head attends to the antipode and a rotated one to a direction 0.9 rad
        # away, both nearly empty in a clustered state (see the dynamic-range test)
        heads += [-0.4 * np.eye(2), 0.7 * rotation2(0.9)]
    assert_within_bound(beta * np.stack(heads), x, route="circle")


def test_dynamic_range_refused_by_fast_and_exact_under_auto(rng):
    # clusters and a repulsive head at large beta: a token's Z is set by the far side of the
    # circle, e^{-2|a|} below the kernel's maximum, so no Fourier tolerance reaches 1e-10
    x = clustered(rng, 2100, 2, k=3)
    BM = 100.0 * np.stack([np.eye(2), -0.4 * np.eye(2)])
    with pytest.raises(InvalidParameterError, match="cannot meet tol.*head 1"):
        exp_sums(BM, x, x, None, summation="fast")
    auto = exp_sums(BM, x, x, None, summation="auto")
    exact = exp_sums(BM, x, x, None, summation="exact")
    assert auto[0].method == "circle" and auto[1].method == "exact" and "tol" in auto[1].reason
    np.testing.assert_array_equal(auto[1].logz, exact[1].logz)
    assert np.max(np.abs(np.expm1(auto[0].logz - exact[0].logz))) <= auto[0].bound


@pytest.mark.parametrize("beta", [0.1, 1.0, 10.0, 100.0])
@pytest.mark.parametrize("state", ["uniform", "clustered"])
def test_sphere_scalar_route(rng, beta, state):
    n = 1200
    x = sample_uniform(n, d=3, rng=rng) if state == "uniform" else clustered(rng, n, 3)
    # two heads within 4x share one plan, the third is batched on its own; a negative head
    # (reflected modes) only on the uniform state, see the dynamic-range test
    heads = [np.eye(3), 0.5 * np.eye(3), 0.05 * np.eye(3)] + ([-0.3 * np.eye(3)] if state == "uniform" else [])
    assert_within_bound(beta * np.stack(heads), x, route="scalar")


@pytest.mark.parametrize("r, d", [(1, 4), (2, 5), (3, 7)])
def test_low_rank_route_any_dimension(rng, r, d):
    # M = Q^T K of rank r <= 3 acting on S^{d-1}, d > 3: the r-dimensional Gauss transform
    n = 1000
    x = sample_uniform(n, d=d, rng=rng)
    Q, K = rng.standard_normal((r, d)) / np.sqrt(d), rng.standard_normal((r, d)) / np.sqrt(d)
    for beta in (0.5, 4.0):
        assert_within_bound(beta * (Q.T @ K)[None], x, route="gauss")


def test_weighted_measure_at_other_points(rng):
    # mean-field use: sources with weights (some empty cells), targets elsewhere
    y = sample_uniform(1500, d=3, rng=rng)
    w = rng.random(1500) * (rng.random(1500) > 0.2)
    w /= w.sum()
    q = sample_uniform(1800, d=3, rng=rng)
    assert_within_bound(5.0 * np.eye(3)[None], q, y, w)


def test_flat_geometry_uses_the_general_route(rng):
    x = 0.8 * rng.standard_normal((1000, 3))
    exact, fast = assert_within_bound(0.7 * np.eye(3)[None], x, on_sphere=False, route="gauss")


@settings(max_examples=int(os.environ.get("HEADFLOW_HYPOTHESIS_EXAMPLES", 25)), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(40, 700), d=st.sampled_from([2, 3]),
       beta=st.floats(0.01, 40.0), spread=st.sampled_from([0.0, 0.01, 0.3]),
       lam=st.lists(st.floats(-1.5, 1.5).filter(lambda v: abs(v) > 0.05), min_size=1, max_size=3),
       tol=st.sampled_from([1e-6, 1e-8, 1e-10]))
def test_bound_is_honest_on_random_inputs(seed, n, d, beta, spread, lam, tol):
    rng = np.random.default_rng(seed)
    x = sample_uniform(n, d=d, rng=rng) if spread == 0.0 else clustered(rng, n, d, k=3, spread=spread)
    BM = beta * np.stack([v * np.eye(d) for v in lam])
    try:
        assert_within_bound(BM, x, tol=tol)
    except InvalidParameterError as err:
        # a refusal is allowed only for what the bound cannot reach: a repulsive head whose
        # antipodes are nearly empty, or a tolerance beyond double precision at this range
        assert "cannot meet tol" in str(err)
        assert min(lam) < 0 or tol <= 1e-10


@settings(max_examples=int(os.environ.get("HEADFLOW_HYPOTHESIS_EXAMPLES", 25)), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(300, 1500), beta=st.sampled_from([1.0, 10.0, 40.0]),
       state=st.sampled_from(["uniform", "clustered", "two clusters"]), tol=st.sampled_from([1e-4, 1e-6, 1e-8]))
def test_fast_velocity_meets_the_requested_tolerance(seed, n, beta, state, tol):
    # the NUFFT tolerances are as loose as tol allows (the type-2 one set from the computed modes):
    # Z_i within its bound <= tol, the velocity within the bound it implies, on S^2 at several beta
    rng = np.random.default_rng(seed)
    if state == "uniform":
        x = sample_uniform(n, d=3, rng=rng)
    else:
        x = clustered(rng, n, 3, k=1 if state == "clustered" else 2, spread=0.05)
    lam = np.array([1.0, 0.6])
    fast = MultiHead.scalar(lam, d=3, beta=beta, kind="softmax", summation="fast", tol=tol)
    exact = fast.replace(summation="exact")
    bounds = []
    for f, e in zip(fast.sums(x), exact.sums(x)):
        assert f.method == "scalar" and 0 < f.bound <= tol
        assert np.max(np.abs(np.expm1(f.logz - e.logz))) <= f.bound
        bounds.append(f.bound)
    # v = scale * P_x sum_h lambda_h mean_h, and a mean errs by at most 2 eta max|y| = 2 eta
    err_v = np.max(np.linalg.norm(fast.velocity(x) - exact.velocity(x), axis=1))
    assert err_v <= fast.velocity_scale(n) * np.sum(np.abs(lam) * 2 * np.array(bounds))


def test_isolated_token_row_is_recomputed_exactly(rng):
    # one token antipodal to a tight cluster: its Z is its own weight, ||c||_1 / T_i ~ n
    x = clustered(rng, 3000, 3, k=1, spread=0.01)
    x[0] = -x[1:].mean(axis=0) / np.linalg.norm(x[1:].mean(axis=0))
    exact, fast = assert_within_bound(20.0 * np.eye(3)[None], x, tol=1e-10)
    assert fast[0].n_exact >= 1


def test_multihead_fast_matches_exact_everywhere(rng):
    n, d = 2500, 3
    x = clustered(rng, n, d, k=6, spread=0.1)
    kw = dict(beta=4.0, log_time_scale="auto")
    for kind in ("usa", "softmax"):
        ex = MultiHead.scalar([1.0, 0.6], d=d, kind=kind, summation="exact", **kw)
        fa = MultiHead.scalar([1.0, 0.6], d=d, kind=kind, summation="fast", **kw)
        de, df = diagnose(ex, x), diagnose(fa, x)
        bound = float(np.max(df["summation_bound"]))
        assert np.all(df["summation_fast"] == 1) and np.all(de["summation_fast"] == 0) and 0 < bound <= 1e-10
        np.testing.assert_allclose(fa.velocity(x), ex.velocity(x), rtol=0,
                                   atol=2 * bound * np.abs(ex.velocity(x)).max() * 10)
        np.testing.assert_allclose(df["energy"], de["energy"], rtol=bound)
        np.testing.assert_allclose(df["entropy"], de["entropy"], rtol=0, atol=bound * (1 + 2 * kw["beta"]))
        for key in ("kinetic", "energy_rate", "rd_margin_min"):
            np.testing.assert_allclose(df[key], de[key], rtol=1e-8, atol=1e-12)


def test_energy_identity_along_a_fast_trajectory(rng):
    # Theorem 11 for USA heads with every sum fast: the finite-difference rate of the (fast)
    # energy equals (1/n) sum |x_i'|^2 to the bound, not only algebraically at one state
    n, d, h = 400, 3, 4e-3
    model = MultiHead.scalar([1.0, 0.5], d=d, beta=3.0, kind="usa", summation="fast", tol=1e-11)
    x0 = sample_uniform(n, d=d, rng=rng)
    traj = simulate(x0, model, t1=10 * h, dt=h, method="rk4", save=SaveAt(ts=np.arange(11) * h))
    E = np.array([model.energy(x) for x in traj.x])
    kin = np.array([diagnose(model, x, include=["kinetic"])["kinetic"] for x in traj.x])
    fd = (E[2:] - E[:-2]) / (2 * h)
    # error budget: the bound on E over the step, the O(h^2) central-difference error, rk4's O(h^4)
    rel = np.abs(fd - kin[1:-1]) / kin[1:-1]
    assert np.max(rel) < 1e-4
    assert np.all(fd > 0)  # the energy rises along the flow


def test_fast_is_refused_where_it_cannot_hold(rng):
    with pytest.raises(InvalidParameterError, match="ReLU"):
        MultiHead.scalar([1.0], d=3, kind="relu", summation="fast")
    with pytest.raises(InvalidParameterError, match="rank 5 > 3"):
        MultiHead.scalar([1.0], d=5, summation="fast")
    with pytest.raises(InvalidParameterError, match="summation"):
        MultiHead.scalar([1.0], d=3, summation="fastest")
    for bad in (0.0, 1.0, -1e-3, float("nan")):
        with pytest.raises(InvalidParameterError, match="tol"):
            MultiHead.scalar([1.0], d=3, tol=bad)
    # a tolerance that FINUFFT's double precision cannot reach at this dynamic range
    model = MultiHead.scalar([1.0], d=3, beta=50.0, kind="softmax", summation="fast", tol=1e-14)
    with pytest.raises(InvalidParameterError, match="cannot meet tol.*'auto'"):
        model.velocity(sample_uniform(500, d=3, rng=rng))


def test_non_finite_tokens_are_refused(rng):
    x = sample_uniform(100, d=3, rng=rng)
    x[3, 0] = np.nan
    with pytest.raises(InvalidParameterError, match="finite"):
        MultiHead.scalar([1.0], d=3, summation="fast").velocity(x)


def test_auto_falls_back_and_says_why(rng, caplog):
    caplog.set_level(logging.INFO, logger="headflow.summation")
    small = MultiHead.scalar([1.0], d=3, kind="softmax")
    x = sample_uniform(64, d=3, rng=rng)
    (p,) = small.sums(x)
    assert p.method == "exact" and "pairs" in p.reason
    # d = 5 scalar heads have rank 5: no route, exact, logged
    big = MultiHead.scalar([1.0], d=5, kind="softmax")
    x5 = sample_uniform(2100, d=5, rng=rng)
    (p,) = big.sums(x5)
    assert p.method == "exact" and "rank 5" in p.reason
    assert any("rank 5" in r.getMessage() for r in caplog.records)
    # a measure concentrated far from its query points: the bound cannot hold, exact it is
    y = clustered(rng, 2100, 3, k=1, spread=0.01)
    q = -y
    model = MultiHead.scalar([1.0], d=3, beta=40.0, kind="softmax", summation="auto")
    (p,) = model.sums(q, sources=y, weights=np.full(len(y), 1 / len(y)))
    (e,) = exp_sums(40.0 * np.eye(3)[None], q, y, np.full(len(y), 1 / len(y)), summation="exact")
    assert p.method == "exact" and p.reason
    np.testing.assert_array_equal(p.logz, e.logz)
    # at beta = 40 and n = 2100 the 3-D mode grid costs more than the n^2 exps: exact
    x3 = sample_uniform(2100, d=3, rng=rng)
    (p,) = model.sums(x3)
    assert p.method == "exact" and "cheaper" in p.reason
    # at moderate beta and above the size threshold on a benign state, auto takes the fast route
    (p,) = MultiHead.scalar([1.0], d=3, beta=4.0, kind="softmax").sums(sample_uniform(6000, d=3, rng=rng))
    assert p.method == "scalar" and p.bound <= DEFAULT_TOL


def test_beta_zero_is_a_plain_mean(rng):
    x = sample_uniform(3000, d=3, rng=rng)
    model = MultiHead.scalar([1.0], d=3, beta=0.0, kind="softmax", summation="fast")
    (p,) = model.sums(x)
    np.testing.assert_allclose(p.mean, np.broadcast_to(x.mean(axis=0), x.shape), atol=1e-15)
    np.testing.assert_allclose(p.logz, np.log(3000.0))
