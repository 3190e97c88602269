"""Classes of input that gave a meaningless answer without a word, each refused by one rule of the
validation machine (particles/_core/arrays.py, params.py): a value outside its domain (never clipped),
a degenerate input (constant, one token, a repeated grid value, S^0), floats taken as integers."""

from __future__ import annotations

import numpy as np
import pytest

import meanfield as mf
import metrics
import particles
from particles.validation import InvalidParameterError, check_integers, check_real_array, check_varies

# ---------------------------------------------------------------- the rules themselves


def test_domain_rule_refuses_beyond_round_off_and_puts_round_off_on_the_boundary():
    assert check_real_array([1.0 + 1e-15, -0.5], "t", within=(-1.0, 1.0)).tolist() == [1.0, -0.5]
    with pytest.raises(InvalidParameterError, match=r"t must lie in \[-1, 1\] .*not clipped.*1 value\(s\).* 1\.5"):
        check_real_array([1.5, 0.0], "t", within=(-1.0, 1.0))


def test_degenerate_and_integer_rules():
    check_varies(np.array([0.0, 1.0]), "y", why="no slope")
    with pytest.raises(InvalidParameterError, match=r"y must not be constant \(no slope\)"):
        check_varies(np.full(3, 2.0), "y", why="no slope")
    assert check_integers([3, 4], "ids").dtype == np.int64
    for bad in ([1.0, 2.0], np.array([True]), 3):
        with pytest.raises(InvalidParameterError, match="integer dtype"):
            check_integers(bad, "ids")


# ---------------------------------------------------------------- the findings, one per class


def test_zonal_profile_outside_its_domain_is_refused_not_clipped():
    mu = mf.ZonalMeasure(lambda x: 1 + 0.5 * x[:, -1], d=3)
    inside = mu.profile(np.array([-1.0, 0.0, 1.0]))
    with pytest.raises(InvalidParameterError, match=r"ZonalMeasure.profile must lie in \[-1, 1\]"):
        mu.profile(np.array([0.0, 2.0]))  # was the value at t = 1, silently
    assert inside[0] < inside[1] < inside[2]


def test_constant_harmonic_has_no_growth_rate():
    model = particles.MultiHead.scalar([1.0], d=3, beta=1.0, kind="softmax")
    with pytest.raises(InvalidParameterError, match="must not be constant .*degree-0"):
        mf.harmonic_growth(model, lambda y: np.ones(len(y)), m=64, t1=0.1)  # was a NaN rate
    with pytest.raises(InvalidParameterError, match="'k' parameter of uniform_growth_rate.*Degree 0"):
        mf.uniform_growth_rate(1.0, lam=1.0, k=0)  # was 0.0


def test_growth_rates_on_s0_are_refused():
    with pytest.raises(InvalidParameterError, match=r"must have d >= 2 \(S\^0 is two points"):
        mf.growth_rates(particles.MultiHead.scalar([1.0], d=1, beta=1.0, kind="softmax"))  # were numbers


def test_harmonic_amplitudes_of_one_token_are_refused():
    with pytest.raises(InvalidParameterError, match="n >= 2"):
        metrics.harmonic_amplitudes(particles.sample_uniform(1, d=3, rng=0), 3)  # was sqrt(2l + 1)


def test_a_grid_value_given_twice_in_two_spellings_is_refused():
    with pytest.raises(InvalidParameterError, match=r"grid\['beta'\].* repeats a value"):
        metrics.run_sweep({"beta": [1, 1.0]}, n_seeds=1, t1=0.1, dt=0.05, n_saves=2, metrics=["n_clusters"],
                          fixed={"n_particles": 4})  # was two cells of the same beta


def test_integral_floats_are_not_token_ids():
    with pytest.raises(InvalidParameterError, match=r"'ids' parameter of bert_embeddings.*integer dtype"):
        metrics.sentences.bert_embeddings({}, np.array([0.0, 1.0]))  # was taken as ids 0 and 1


def test_scale_free_values_below_the_normal_range_are_refused():
    """Weights or a density up to a constant, all subnormal: digits lost, products 0 (0/0: NaN)."""
    pts, areas = mf.circle_grid(16)
    with pytest.raises(InvalidParameterError, match=r"density_fn\(points\) of GridMeasure.from_density are all below"):
        mf.GridMeasure.from_density(pts, areas, lambda x: 1e-320 * (1 + 0.5 * x[:, 0]))  # was masses off by 1e-4
    model = particles.MultiHead.scalar([1.0], d=3, beta=1.0, kind="softmax")
    x = particles.sample_uniform(5, d=3, rng=0)
    with pytest.raises(InvalidParameterError, match="weights of MultiHead.sums are all below 2.2e-308"):
        model.sums(x, sources=x, weights=np.full(5, 1e-320))
    tiny = mf.GridMeasure.from_density(pts, areas, lambda x: 1e-300 * (1 + 0.5 * x[:, 0]))
    assert np.allclose(tiny.mass, mf.GridMeasure.from_density(pts, areas, lambda x: 1 + 0.5 * x[:, 0]).mass,
                       rtol=1e-14)
