"""A measure given to the wrong scheme or the wrong model is named with its sphere, and the
refusal says which schemes solve it."""

import numpy as np
import pytest

import meanfield as mf
import particles
from particles import InvalidParameterError


def _model(d):
    return particles.MultiHead.scalar([1.0], d=d, beta=1.0, kind="usa")


def _sphere_grid():
    pts, w = mf.sphere_quadrature(3, n=9)
    return mf.GridMeasure.from_density(pts, 4 * np.pi * w, lambda x: 1 + 0.5 * x[:, 2])


def test_a_measure_names_its_sphere():
    zonal = mf.ZonalMeasure(lambda x: 1 + 0.5 * x[:, -1], d=4)
    assert repr(zonal) == "ZonalMeasure(on S^3 (d = 4), axis=[0.0, 0.0, 0.0, 1.0])"
    assert repr(_sphere_grid()) == "GridMeasure(162 cells on S^2 (d = 3))"
    assert repr(mf.EmpiricalMeasure(np.eye(3))) == "EmpiricalMeasure(3 atoms on S^2 (d = 3))"


def test_a_measure_of_another_dimension_is_named_with_both_dimensions():
    mu = mf.ZonalMeasure(lambda x: 1 + 0.5 * x[:, -1], d=4)
    with pytest.raises(InvalidParameterError, match=r"mu0 = ZonalMeasure\(on S\^3 \(d = 4\).*model = MultiHead\(1 head "
                                                    r"on S\^2 \(d = 3\)"):
        mf.wasserstein_ascent(mu, _model(3), t1=0.5, scheme="spectral")


def test_the_wrong_scheme_names_the_ones_that_fit():
    with pytest.raises(InvalidParameterError, match=r"GridMeasure on S\^2 \(d = 3\): use scheme='fv_sphere', 'jko' or "
                                                    r"'spectral'"):
        mf.wasserstein_ascent(_sphere_grid(), _model(3), t1=0.5, scheme="fv_circle")
    with pytest.raises(InvalidParameterError, match=r"EmpiricalMeasure\(3 atoms on S\^2 \(d = 3\)\): use "
                                                    r"scheme='lagrangian'"):
        mf.wasserstein_ascent(mf.EmpiricalMeasure(np.eye(3)), _model(3), t1=0.5, scheme="fv_sphere")
    pts, arcs = mf.circle_grid(16)
    with pytest.raises(InvalidParameterError, match=r"GridMeasure on S\^1 \(d = 2\): use scheme='fv_circle'"):
        mf.wasserstein_ascent(mf.GridMeasure.from_density(pts, arcs, lambda x: 1 + 0 * x[:, 0]), _model(2), t1=0.5,
                              scheme="fv_sphere")


def test_a_cfl_step_below_round_off_is_refused_at_once():
    """USA heads at beta = 400 in physical time: velocities ~e^400 give CFL steps ~1e-176, so a
    finite-volume run to t = 0.5 would take ~1e176 steps (a study's reference hung on it)."""
    from particles import SolverError

    pts, arcs = mf.circle_grid(64)
    mu = mf.GridMeasure.from_density(pts, arcs, lambda x: 1 + 0.5 * x[:, 0])
    model = particles.MultiHead.scalar([1.0], d=2, beta=400.0, kind="usa")
    with pytest.raises(SolverError, match=r"step size underflow at t=0 \(the CFL step .*log_time_scale='auto'"):
        mf.wasserstein_ascent(mu, model, t1=0.5, scheme="fv_circle", max_steps=10_000)
    scaled = model.replace(log_time_scale="auto")  # the fix it names
    assert mf.wasserstein_ascent(mu, scaled, t1=0.01, n_saves=2, scheme="fv_circle").mass.shape == (2, 64)
