"""The consensus rate of scalar heads (Ensemble.consensus_rate) and the warning of simulate where a fixed step
lies outside its method's stability interval at that rate: the closed form against the linearised flow and
against runs on both sides of the limit."""

import warnings

import numpy as np
import pytest
from scipy.optimize import brentq

from particles import Ensemble, SaveAt, StabilityWarning, simulate
from particles._dynamics.steppers import RK4_STABILITY, STEPPERS

HEADS = np.array([0.5, 1.0, 2.0])[:, None, None] * np.eye(4)


def _near_consensus(rng, S, n, d, spread):
    """S systems of n tokens within about ``spread`` of one point each (tangent offsets of mean zero)."""
    c = rng.standard_normal((S, 1, d))
    c /= np.linalg.norm(c, axis=-1, keepdims=True)
    e = rng.standard_normal((S, n, d))
    e -= np.sum(e * c, axis=-1, keepdims=True) * c
    e -= e.mean(axis=1, keepdims=True)
    x = c + spread * e / np.abs(e).max()
    return x / np.linalg.norm(x, axis=-1, keepdims=True), c


@pytest.mark.parametrize("kind", ["softmax", "usa"])
def test_consensus_rate_is_the_contraction_of_the_linearised_flow(rng, kind):
    """Near consensus the velocity is -r times the tokens' tangent offsets from their mean, r the closed form
    (softmax: sum_h w_h; USA: sum_h w_h e^{beta m_h})."""
    beta = np.array([0.5, 2.0, 4.0])
    ens = Ensemble(HEADS, beta=beta, kind=kind)
    lam = np.array([0.5, 1.0, 2.0])
    expected = np.full(3, lam.sum()) if kind == "softmax" else (lam * np.exp(beta[:, None] * lam)).sum(axis=1)
    np.testing.assert_allclose(ens.consensus_rate(), expected, rtol=1e-15)
    x, _ = _near_consensus(rng, 3, 6, 4, 1e-6)
    off = x - x.mean(axis=1, keepdims=True)
    v = ens.velocity(x)
    ratio = np.sum(v * off, axis=(1, 2)) / np.sum(off * off, axis=(1, 2))
    np.testing.assert_allclose(-ratio, expected, rtol=1e-5)


def test_consensus_rate_is_none_where_the_closed_form_does_not_hold():
    assert Ensemble(-HEADS, W=HEADS, beta=[1.0]).consensus_rate() is None  # repulsive scores
    assert Ensemble(np.diag([1.0, 2.0, 3.0, 4.0]), beta=[1.0]).consensus_rate() is None  # no scalar head
    assert Ensemble(HEADS, beta=[1.0], kind="relu").consensus_rate() is None


def test_the_intervals_are_the_roots_of_the_amplification_factors():
    """|R(-z)| = 1 at each method's interval: R = 1 - z (Euler), 1 - z + z^2/2 (Heun), RK4's quartic."""
    quartic = lambda z: 1 - z + z**2 / 2 - z**3 / 6 + z**4 / 24  # noqa: E731
    assert STEPPERS["euler"].stability == STEPPERS["heun"].stability == 2.0
    assert abs(quartic(RK4_STABILITY) - 1) < 1e-14
    assert RK4_STABILITY == pytest.approx(brentq(lambda z: quartic(z) - 1, 2.0, 3.0, xtol=1e-15), abs=1e-14)


@pytest.mark.parametrize("method", ["euler", "heun", "rk4"])
def test_steps_beyond_the_interval_leave_a_cluster_apart_and_are_warned(rng, method):
    """USA heads at beta = 0.5 (rate 7.73): tokens near consensus collapse with dt at 0.95 of the limit
    interval / rate, without a warning; at 1.05 of it they stay apart, and simulate warns."""
    ens = Ensemble(HEADS, beta=np.full(4, 0.5), kind="usa")
    limit = STEPPERS[method].stability / ens.consensus_rate().max()
    x0, _ = _near_consensus(rng, 4, 8, 4, 0.05)
    spreads = {}
    for f in (0.95, 1.05):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            traj = simulate(x0, ens, t1=40.0, dt=f * limit, method=method, save=SaveAt(t0=False), progress=False)
        warned = [w for w in caught if issubclass(w.category, StabilityWarning)]
        assert len(warned) == (f > 1), [str(w.message) for w in caught]
        x = traj.x[-1]
        spreads[f] = np.linalg.norm(x - x.mean(axis=1, keepdims=True), axis=-1).max()
    assert spreads[0.95] < 1e-6 and spreads[1.05] > 1e-3  # from 0.05: contracted, or held apart
    assert "stability interval" in str(warned[0].message) and f"{limit:.3g}" in str(warned[0].message)


@pytest.mark.parametrize("kind", ["softmax", "usa"])
def test_a_multihead_states_the_rate_of_its_ensemble_and_simulate_warns_on_it(rng, kind):
    """MultiHead.consensus_rate is the Ensemble's (USA: times e^{-c} in the rescaled time of log_time_scale);
    None with a causal mask or another update; simulate of a MultiHead warns beyond the limit as an Ensemble's."""
    from particles import MultiHead

    model = MultiHead.scalar([0.5, 1.0, 2.0], d=4, beta=0.5, kind=kind)
    ens = Ensemble(HEADS, beta=[0.5], kind=kind)
    assert model.consensus_rate() == pytest.approx(ens.consensus_rate()[0], rel=1e-15)
    if kind == "usa":
        scaled = model.replace(log_time_scale=1.5)
        assert scaled.consensus_rate() == pytest.approx(model.consensus_rate() * np.exp(-1.5), rel=1e-14)
    assert model.replace(causal=True).consensus_rate() is None
    assert model.replace(update="post_ln").consensus_rate() is None
    x0, _ = _near_consensus(rng, 1, 6, 4, 0.05)
    limit = 2.0 / model.consensus_rate()
    with pytest.warns(StabilityWarning, match="stability interval"):
        simulate(x0[0], model, t1=2.0, dt=1.05 * limit, method="heun", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StabilityWarning)
        simulate(x0[0], model, t1=2.0, dt=0.95 * limit, method="heun", progress=False)
