"""The spectral entry point chooses the fast route and fails fast: an axisymmetric density on S^2 is
sent to the zonal route, each band-limit change is logged, a flow whose band limit passes the cap
is refused early with the saves it finished, and only fixes that exist are suggested."""

import logging
import warnings

import numpy as np
import pytest

import meanfield as mf
from meanfield._spectral.route import zonal_axis
from particles import MultiHead, SolverError


def usa(d=3):
    return MultiHead.scalar([1.0], d=d, beta=2.0, kind="usa")


def grid(fn, n=17):
    pts, w = mf.sphere_quadrature(3, n=n)
    return mf.GridMeasure.from_density(pts, 4 * np.pi * w, fn)


def coefficients(fn, L=24):
    sht = mf.sphere_harmonic_transform(L, L + 1)
    c = sht.analysis(fn(sht.points).reshape(sht.nlat, sht.nlon))
    return c / c[0, 0].real


def test_zonal_axis_is_found_for_any_axis_and_only_for_zonal_densities():
    e = np.array([1.0, 2.0, 2.0]) / 3
    np.testing.assert_allclose(zonal_axis(coefficients(lambda x: np.exp(2 * x @ e))), e, atol=1e-12)
    np.testing.assert_allclose(zonal_axis(coefficients(lambda x: 1 + 0.5 * x[:, 2])), [0, 0, 1], atol=1e-12)
    axis = zonal_axis(coefficients(lambda x: np.exp((x @ e) ** 2)))  # no dipole: the quadrupole's axis
    np.testing.assert_allclose(np.abs(axis @ e), 1.0, atol=1e-12)
    assert zonal_axis(coefficients(lambda x: np.exp(x[:, 0] ** 2 + 0.5 * x[:, 1] ** 2))) is None
    assert zonal_axis(coefficients(lambda x: np.exp(0.8 * x[:, 2] + 0.4 * x[:, 0] * x[:, 1]))) is None
    assert zonal_axis(coefficients(lambda x: 1 + 0.5 * x[:, 2] + 1e-4 * x[:, 0] * x[:, 1])) is None


def test_axisymmetric_grid_measure_is_sent_to_the_zonal_route():
    e = np.array([1.0, 2.0, 2.0]) / 3
    tilted = grid(lambda x: 1 + 0.5 * x @ e)
    with pytest.warns(UserWarning, match=r"axisymmetric about e = \(0.333333, 0.666667, 0.666667\).*"
                                         r"ZonalMeasure\(density_fn, d=3"):
        mf.wasserstein_ascent(tilted, usa(), t1=0.05, n_saves=2, scheme="spectral")
    mu0 = grid(lambda x: 1 + 0.5 * x[:, 2])
    with warnings.catch_warnings():
        # no hint: zonal about the pole (the solver advances its order-0 column alone, the zonal route's
        # cost), a fixed L, a non-zonal density, or general heads
        warnings.simplefilter("error")
        mf.wasserstein_ascent(mu0, usa(), t1=0.05, n_saves=2, scheme="spectral")
        mf.wasserstein_ascent(tilted, usa(), t1=0.05, n_saves=2, scheme="spectral", L=16)
        mf.wasserstein_ascent(grid(lambda x: np.exp(0.5 * x[:, 0] * x[:, 1])), usa(), t1=0.05, n_saves=2,
                              scheme="spectral")
        heads = MultiHead(np.diag([1.0, 0.5, 0.2])[None], beta=1.0, kind="softmax", summation="exact")
        mf.wasserstein_ascent(mu0, heads, t1=0.01, n_saves=2, scheme="spectral", tol=1e-6)


def test_band_limit_changes_are_logged_and_recorded(caplog):
    mu0 = mf.ZonalMeasure(lambda x: 1 + 0.5 * x[:, -1], d=3)
    with caplog.at_level(logging.INFO, logger="meanfield.spectral"):
        res = mf.wasserstein_ascent(mu0, usa(), t1=1.4, n_saves=2, scheme="spectral")
    changes = res.info["band_limits"]
    assert len(changes) >= 2 and all(a < b for _, a, b in changes) and changes[-1][2] == res.info["L"]
    logged = [r.getMessage() for r in caplog.records if "band limit" in r.getMessage()]
    assert len(logged) == len(changes) and f"-> {res.info['L']}" in logged[-1]


def test_a_flow_past_the_cap_is_refused_early_with_its_saves():
    """Zonal, noiseless, to t = 2.5: the band limit passes the cap 4096 near t = 2.05. Refused while the
    band limit is an eighth of the cap (bounded memory), returning the saves finished, and no fix that
    does not exist (max_L is already the solver's cap)."""
    mu0 = mf.ZonalMeasure(lambda x: 1 + 0.5 * x[:, -1], d=3)
    res = mf.wasserstein_ascent(mu0, usa(), t1=2.5, n_saves=11, scheme="spectral", on_failure="return")
    assert res.status == "failed" and "passes the cap max_L=4096" in res.message
    assert "raise max_L" not in res.message and "a t1 well before t ~" in res.message
    assert 1.5 <= res.t[-1] < 2.05 and len(res.mass) == len(res.t) == len(res.info["tail"])
    assert max(b for _, _, b in res.info["band_limits"]) <= 4096 // 4
    with pytest.raises(SolverError, match=r"on_failure='return' the saves reached so far are returned"):
        mf.wasserstein_ascent(mu0, usa(), t1=2.5, n_saves=11, scheme="spectral")


def test_a_cap_below_the_solver_cap_suggests_raising_it_within_the_cap():
    mu0 = mf.ZonalMeasure(lambda x: 1 + 0.5 * x[:, -1], d=3)
    with pytest.raises(SolverError, match=r"raise max_L \(up to this solver's cap 4096\)"):
        mf.wasserstein_ascent(mu0, usa(), t1=2.0, n_saves=2, scheme="spectral", max_L=64)


def test_progress_bar_shows_time_and_band_limit(capsys):
    mu0 = mf.ZonalMeasure(lambda x: 1 + 0.5 * x[:, -1], d=3)
    res = mf.wasserstein_ascent(mu0, usa(), t1=1.2, n_saves=2, scheme="spectral", progress=True)
    err = capsys.readouterr().err
    assert "spectral" in err and f"L = {res.info['L']}" in err and "t = 1.2/1.2" in err
