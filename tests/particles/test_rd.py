"""Radial dominance along trajectories and the largest beta keeping it (vs beta* and the equiangular ODE)."""

import numpy as np
import pytest

from particles import (
    RD_CANDIDATES,
    MultiHead,
    SaveAt,
    diagnose,
    radial_dominance,
    rd_margins,
    rd_threshold,
    rd_threshold_equiangular,
    sample_uniform,
    simulate,
)
from particles import theory as th
from tests.helpers import random_symmetric
from tests.particles.test_orthogonality import rotated_heads


@pytest.mark.parametrize("rho", [0.0, 0.2, 0.7])
def test_cos_angle_equiangular_closed_form(rho):
    n, beta = 9, 1.3
    x = th.equiangular_tokens(n, rho)
    cos = diagnose(MultiHead.scalar([0.8, 0.8], d=n, beta=beta, kind="softmax"), x)["cos_angle"]
    np.testing.assert_allclose(cos, th.cos_angle_equiangular(rho, beta=beta, n=n, alpha=0.8), rtol=1e-12)


def test_margins_match_diagnose_and_rates(rng):
    n = 7
    model = MultiHead(random_symmetric(rng, 3, 4, 0.6), beta=1.1)
    x = sample_uniform(n, d=4, rng=rng)
    m = rd_margins(model, x)
    diag = diagnose(model, x)
    np.testing.assert_allclose(m["pointwise"], diag["rd_margin"], rtol=1e-12, atol=1e-14)
    # "exact" is the token term of n³ dE_h/dt (Theorems 16–17)
    np.testing.assert_allclose(m["exact"].sum(axis=1) / n**3, diag["head_energy_rate"], rtol=1e-11)
    assert np.all(m["pointwise"] <= m["orthogonal"] + 1e-14)


def test_report_hierarchy_along_run_with_orthogonal_heads(rng):
    model = MultiHead(rotated_heads(0.0), beta=1.2)
    traj = simulate(sample_uniform(6, d=4, rng=rng), model, t1=2.0, dt=0.02, save=SaveAt(ts=np.linspace(0, 2, 11)))
    rep = radial_dominance(model, traj)
    assert set(rep.holds) == set(RD_CANDIDATES) and rep.holds["exact"].shape == (11, 2, 6)
    # pointwise ⇒ orthogonal ⇒ exact (the last because M_1 M_2 = 0)
    assert np.all(rep.holds["orthogonal"][rep.holds["pointwise"]])
    assert np.all(rep.holds["exact"][rep.holds["orthogonal"]])
    for name in RD_CANDIDATES:
        fails = rep.failures(name)
        first = rep.t[fails[0, 0]] if len(fails) else np.inf
        assert rep.first_failure[name] == first and rep.holds_throughout[name] == (len(fails) == 0)
        np.testing.assert_allclose(rep.fraction(name), rep.holds[name].mean(axis=(1, 2)))
    rep2 = radial_dominance(model, traj.x, ts=traj.t)
    np.testing.assert_array_equal(rep2.margins["exact"], rep.margins["exact"])


def test_threshold_at_t0_is_beta_star():
    n = 12
    x0 = th.orthogonal_tokens(n, rng=3)
    for H in (2, 3):
        res = rd_threshold(lambda b, H=H: MultiHead.scalar([1.0] * H, d=n, beta=b, kind="softmax"),
                           x0, t1=0.0, bracket=(0.0, 2.0), xtol=1e-9)
        assert res.status == "bracketed" and res.value == pytest.approx(th.beta_star(H, n=n, alpha=1.0), abs=2e-9)


def test_threshold_along_run_matches_equiangular_ode():
    """From orthogonal tokens the run stays equiangular: the threshold is computable from the ODE."""
    n, T, n_saves = 12, 0.4, 21
    x0 = th.orthogonal_tokens(n)
    make = lambda b: MultiHead.scalar([1.0, 1.0], d=n, beta=b, kind="softmax")  # noqa: E731
    res = rd_threshold(make, x0, t1=T, bracket=(0.0, 1.5), n_grid=4, xtol=2e-3, n_saves=n_saves, dt=T / 80)
    expected = rd_threshold_equiangular(T, n=n, n_saves=n_saves)
    assert res.lower <= expected + 1e-9 <= res.upper + 2e-9
    assert 0.5 < expected < th.beta_star(2, n=n, alpha=1.0) - 0.1  # strictly below beta*: the run matters


def test_threshold_statuses_and_ratio_search():
    """Head-strength ratio r = λ_2/λ_1 at fixed β, softmax, orthogonal tokens: head 1 keeps
    Condition 8 while (q_1/c_1)(1 − c_1²) ≥ r q(βr), with q(b) = e^b/(e^b + n − 1) its own
    attention weight and c_1 = cos∠(f^1, x) (the written-out form of the margin)."""
    from scipy.optimize import brentq

    n, beta = 12, 0.5
    x0 = th.orthogonal_tokens(n)
    res = rd_threshold(lambda r: MultiHead.scalar([1.0, r], d=n, beta=beta, kind="softmax"), x0, t1=0.0,
                       bracket=(0.8, 3.0), xtol=1e-9)
    q = lambda b: np.exp(b) / (np.exp(b) + n - 1)  # noqa: E731
    c1 = th.cos_angle_orthogonal(beta, n=n, alpha=1.0)
    expected = brentq(lambda r: q(beta) / c1 * (1 - c1**2) - r * q(beta * r), 0.8, 3.0, xtol=1e-14)
    assert res.status == "bracketed" and res.value == pytest.approx(expected, abs=2e-9)
    one = rd_threshold(lambda b: MultiHead.scalar([1.0], d=n, beta=b), x0, t1=0.0, bracket=(0.0, 1.0))
    assert one.status == "holds_on_bracket" and one.upper == np.inf  # one head casts no shadow
    bad = rd_threshold(lambda b: MultiHead.scalar([1.0] * 4, d=n, beta=b), x0, t1=0.0, bracket=(3.0, 4.0))
    assert bad.status == "fails_at_lower" and np.isnan(bad.value)


def test_bad_input(rng):
    model = MultiHead.scalar([1.0, 1.0], d=3, beta=1.0)
    with pytest.raises(ValueError, match="'traj' parameter of radial_dominance must be a Trajectory or states of "
                                         "shape \\(k, n, d\\)"):
        radial_dominance(model, np.eye(3))
    with pytest.raises(ValueError, match="ts of radial_dominance must have shape \\(2,\\)"):
        radial_dominance(model, np.stack([np.eye(3)] * 2), ts=[0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="traj.x of radial_dominance must be an array"):
        save = SaveAt(x=False, fn=lambda t, x: {"n": np.float64(x.shape[0])})
        radial_dominance(model, simulate(np.eye(3), model, t1=0.1, dt=0.1, save=save))
    with pytest.raises(ValueError, match="geometry in \\['sphere'\\]"):
        rd_margins(MultiHead.scalar([1.0], d=3, geometry="flat"), np.eye(3))
    with pytest.raises(ValueError, match="'bracket' parameter of rd_threshold must be a sequence of at least 2 "
                                         "strictly increasing values"):
        rd_threshold(lambda b: model, np.eye(3), t1=0.0, bracket=(1.0, 0.0))
    with pytest.raises(ValueError, match="'candidate' parameter of rd_threshold must be one of"):
        rd_threshold(lambda b: model, np.eye(3), t1=0.0, bracket=(0.0, 1.0), candidate="strong")
    with pytest.raises(ValueError, match="'model' parameter of rd_threshold must be a particles.MultiHead"):
        rd_threshold(lambda b: None, np.eye(3), t1=0.0, bracket=(0.0, 1.0))
    with pytest.raises(ValueError, match="'make_model' parameter of rd_threshold must be a callable"):
        rd_threshold(model, np.eye(3), t1=0.0, bracket=(0.0, 1.0))
