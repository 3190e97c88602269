"""metrics.chaos_horizon_study: schema, predictions against the measured breakdown, resume, bad input."""

from types import SimpleNamespace

import numpy as np
import pytest
import xarray as xr

import meanfield as mf
import metrics
import particles
from metrics import sliced_w2_to_uniform_s2
from particles import InvalidParameterError, MultiHead

SOFTMAX_S1 = MultiHead.scalar([1.0], d=2, beta=0.5, kind="softmax")  # sigma_1 = 0.485 ~ 2 sigma_2
QUICK = dict(n_values=[200, 800], n_seeds=2, t1=9.0, n_saves=61, delta=(0.1, 0.2), dt=0.1, l_max=3, n_boot=50)


@pytest.fixture(scope="module")
def s1_study():
    return metrics.chaos_horizon_study(SOFTMAX_S1, **QUICK)


def test_schema_and_round_trip(s1_study, tmp_path):
    ds = s1_study
    assert ds.distance.dims == ("n_particles", "seed", "time")
    assert ds.amplitude.dims == ("n_particles", "seed", "time", "degree")
    assert ds.t_delta.dims == ds.t_delta_predicted.dims == ("delta", "n_particles", "seed")
    for name in list(ds.data_vars) + list(ds.coords):
        assert {"long_name", "units"} <= set(ds[name].attrs), name
    # times are times and rates their inverse (t_delta = 0 is "at the start", not a pure number)
    times = ("t_delta", "t_delta_predicted", "t_delta_distance", "slope", "slope_ci", "slope_predicted")
    assert {ds[v].attrs["units"] for v in times} == {"time"}
    assert {ds[v].attrs["units"] for v in ("growth_rate", "sigma_star")} == {"1/time"}
    assert ds.attrs["t1"] == QUICK["t1"] and ds.attrs["kind"] == "softmax"
    ds.to_netcdf(tmp_path / "c.nc")
    with xr.open_dataset(tmp_path / "c.nc") as back:
        xr.testing.assert_identical(back.load(), ds)


def test_study_agrees_with_theory(s1_study):
    ds = s1_study
    sigma = mf.growth_rates(SOFTMAX_S1, l_max=3)
    assert int(ds.l_star) == 1 and np.isclose(float(ds.sigma_star), sigma[1], rtol=1e-14)
    assert np.isclose(float(ds.slope_predicted), 1 / (2 * sigma[1]))
    # the amplitude at t = 0 is the one of the i.i.d. sample, and t_delta matches the linearised prediction
    assert np.all(np.isfinite(ds.t_delta)) and np.all(ds.success == 1)
    assert float(np.abs(ds.t_delta / ds.t_delta_predicted - 1).max()) < 0.1
    # W1 to the uniform measure is of order n^{-1/2} at t = 0 (E W1 <= pi/2 sqrt(pi/n) by Kolmogorov-Smirnov bounds)
    w0 = ds.distance.isel(time=0) * np.sqrt(ds.n_particles)
    assert float(w0.max()) < 4.0 and float(w0.min()) > 0.05
    z = ds.horizon_z.values
    assert np.allclose(z, float(ds.sigma_star) * ds.t_delta.values - 0.5 * np.log(ds.n_particles.values)[None, :, None]
                       - np.log(ds.delta.values)[:, None, None])


def test_distance_closed_forms(rng):
    # S^2: SW2 of the exact uniform law's quantiles is ~0; a point mass at a pole, axis e_3: W2^2 = 1 + 1/3
    e = np.eye(3)
    assert np.isclose(sliced_w2_to_uniform_s2(e[[2]], e[[2]]), np.sqrt(4 / 3))
    n = 2000
    z = (2 * np.arange(n) + 1) / n - 1  # exact quantiles of U[-1,1] along e_3, any azimuth
    phi = rng.uniform(0, 2 * np.pi, n)
    r = np.sqrt(1 - z ** 2)
    x = np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)
    assert np.isclose(sliced_w2_to_uniform_s2(x, e[[2]]), np.sqrt(1 / (3 * n * n)))


def test_resume_from_store(tmp_path, monkeypatch):
    kw = dict(QUICK, n_values=[50, 100], n_seeds=1, t1=6.0, n_saves=31, delta=0.4)
    first = metrics.chaos_horizon_study(SOFTMAX_S1, store=tmp_path, **kw)
    assert len(list(tmp_path.glob("cell_*.nc"))) == 2

    def boom(*a, **k):
        raise AssertionError("a stored cell was recomputed")

    monkeypatch.setattr("metrics._studies.spec.simulate", boom)
    again = metrics.chaos_horizon_study(SOFTMAX_S1, store=tmp_path, **kw)
    for v in ("distance", "amplitude", "t_delta", "slope"):
        xr.testing.assert_identical(again[v], first[v])


def test_stable_regime_has_no_breakdown():
    kstar = mf.critical_kappa(0.5, lam=1.0, kind="softmax")
    # stationary fluctuations: sqrt(n) A_1 ~ chi_2 / sqrt(1 - kappa/kappa*), below 0.6 sqrt(n) for n >= 400
    ds = metrics.chaos_horizon_study(SOFTMAX_S1, n_values=[400, 1600], n_seeds=2, t1=4.0, n_saves=21, delta=0.6,
                                     kappa=0.8 * kstar, dt=0.02, l_max=2, n_boot=20)
    assert float(ds.sigma_star) < 0 and np.isinf(float(ds.slope_predicted))
    assert np.all(np.isinf(ds.t_delta)) and np.all(ds.dominant_mode == 0)
    assert np.all(np.isfinite(ds.sup_scaled_distance))


def test_s2_quick():
    model = MultiHead.scalar([1.0], d=3, beta=4.0, kind="softmax")
    sigma = mf.growth_rates(model, l_max=4)
    ds = metrics.chaos_horizon_study(model, n_values=[100, 300], n_seeds=1, t1=3.0, n_saves=31, delta=0.5, dt=0.05,
                                     l_max=4, n_boot=20, n_projections=16)
    assert int(ds.l_star) == int(np.argmax(sigma[1:]) + 1)
    assert ds.amplitude.sizes["degree"] == 4 and np.all(np.isfinite(ds.distance))


def test_bad_input():
    with pytest.raises(InvalidParameterError,
                       match=r"'delta' parameter of chaos_horizon_study must be a real number in \(0, inf\)"):
        metrics.chaos_horizon_study(SOFTMAX_S1, **dict(QUICK, delta=0.0))
    # a threshold the breakdown quantity can never reach (A_l <= sqrt(2) on S^1) is refused, not run to inf
    with pytest.raises(InvalidParameterError, match=r"must be below 1.414.*sqrt\(2\) on S\^1.*never reached"):
        metrics.chaos_horizon_study(SOFTMAX_S1, **dict(QUICK, delta=2.0))
    with pytest.raises(InvalidParameterError, match="too coarse to resolve t_delta.*Use n_saves >= "):
        metrics.chaos_horizon_study(SOFTMAX_S1, **dict(QUICK, n_saves=5))
    with pytest.raises(InvalidParameterError, match="'density' parameter of chaos_horizon_study must be one of "
                                                    "'uniform' or a density function"):
        metrics.chaos_horizon_study(SOFTMAX_S1, "gaussian", **QUICK)
    with pytest.raises(InvalidParameterError, match="density_fn"):
        metrics.chaos_horizon_study(SOFTMAX_S1, np.cos, **QUICK)  # (m, 2) values, not one per point
    with pytest.raises(InvalidParameterError, match="'n_values' parameter"):
        metrics.chaos_horizon_study(SOFTMAX_S1, **dict(QUICK, n_values=[100]))
    with pytest.raises(InvalidParameterError, match="must include the most unstable degree"):
        metrics.chaos_horizon_study(MultiHead.scalar([1.0], d=3, beta=12.0, kind="softmax"), **dict(QUICK, l_max=1))


def test_warns_when_the_horizon_is_too_short():
    with pytest.warns(metrics.ResolutionWarning, match="did not reach delta by t1.*raise t1"):
        metrics.chaos_horizon_study(SOFTMAX_S1, **dict(QUICK, n_values=[200, 400], n_seeds=1, t1=1.0, n_saves=11))


def test_seeds_per_n():
    """n_seeds per n: the unused seeds are NaN, n_seeds_run records the counts, the slope is fitted over
    the runs made, and the draws of (seed, n) are independent (a seed's tokens differ across n)."""
    ds = metrics.chaos_horizon_study(SOFTMAX_S1, **dict(QUICK, n_seeds=(3, 1)))
    assert ds.n_seeds_run.values.tolist() == [3, 1] and ds.sizes["seed"] == 3
    assert np.all(np.isnan(ds.t_delta.isel(n_particles=1, seed=slice(1, None))))
    assert np.all(np.isfinite(ds.t_delta.isel(n_particles=0)))
    assert np.all(np.isfinite(ds.slope))
    td = ds.t_delta.values
    expect = [metrics.fit_horizon_slope(ds.n_particles.values, td[i], counts=[3, 1], n_boot=50, rng=0)
              for i in range(ds.sizes["delta"])]
    np.testing.assert_allclose(np.c_[ds.slope, ds.slope_ci], expect)


def _bump(x):
    """A perturbed start on S^1: 1 + 0.2 cos(theta) (unnormalised)."""
    return 1 + 0.2 * x[:, 0]


@pytest.mark.filterwarnings("ignore::metrics.ResolutionWarning")  # a run may not reach delta by t1
def test_perturbed_start_against_the_spectral_mean_field():
    """A density start: tokens from it, distances to the spectral mu(t) (W1 ~ n^-1/2 at t = 0), breakdown on
    the distance, no uniform-state predictions; the reference is recorded with its error."""
    kw = dict(QUICK, n_values=[100, 1600], n_seeds=3, t1=5.0, n_saves=51, delta=(0.05,))
    ds = metrics.chaos_horizon_study(SOFTMAX_S1, _bump, **kw)
    assert "spectral" in ds.attrs["reference"] and ds.attrs["reference_error"] < 1e-3
    w0 = ds.distance.isel(time=0).mean("seed").values
    assert 2.0 < w0[0] / w0[1] < 8.0  # sqrt(16) = 4 for an n^-1/2 law, with 3 seeds of noise
    np.testing.assert_array_equal(ds.t_delta.values, ds.t_delta_distance.values)
    assert np.all(np.isnan(ds.t_delta_predicted)) and np.all(np.isnan(ds.horizon_z))
    assert np.isnan(float(ds.slope_predicted)) and np.all(np.isnan(ds.dominant_mode))
    assert ds.distance.attrs["long_name"].startswith("W1(mu_n(t), mu(t))")
    with pytest.raises(InvalidParameterError, match="Lower t1 to before the mean field concentrates"):
        metrics.chaos_horizon_study(SOFTMAX_S1, _bump, **dict(kw, t1=12.0, n_saves=121))  # mu(t) clusters by ~7


def test_spectral_reference_of_the_uniform_density_is_the_uniform_reference(rng):
    """The two reference objects agree where they describe the same measure: a constant density's
    spectral mu(t) is sigma at every save, so its W1 equals the closed form against sigma."""
    from metrics._studies.reference import UniformReference, setup_reference

    ts = np.linspace(0, 1.0, 3)
    ref = setup_reference(SimpleNamespace(
        model=SOFTMAX_S1, density_fn=lambda x: 1 + 0 * x[:, 0], ts=ts, m_grid=1024, kappa=np.inf, dt=0.1, t1=1.0,
        n_saves=3, n_values=[500], n_reference=None, seed=0, n_projections=8, n_quantiles=1024, transport="auto",
        w2_max_n=0, reference="spectral"), store=None, progress=False)["reference"]
    x = particles.sample_uniform(500, d=2, rng=rng)
    uniform = UniformReference(2, None).distances(500)(x, 0)["w1"]
    for k in range(3):
        assert ref.distances(500)(x, k)["w1"] == pytest.approx(uniform, abs=2 * np.pi / 2000)


def test_runs_that_start_above_delta_are_flagged_and_masked():
    """issue 37: a run whose A_{l*}(0) >= delta has t_delta = 0 but no breakdown to predict (the linearised
    time would be <= 0): it is flagged, its prediction and Z are NaN (out of the KS test), and a warning says so."""
    from metrics._studies.chaos_breakdown import breakdown

    s, ts = 0.5, np.linspace(0, 10, 101)
    a0 = np.array([[0.01, 0.02, 0.2], [0.005, 0.01, 0.02]])  # (n, seed): one run of n = 10 starts above 0.1
    amp = (a0[..., None] * np.exp(s * ts))[..., None]  # (n, seed, time, degree): exact linear growth, l* = 1
    cfg = SimpleNamespace(deltas=np.array([0.1]), l_star=1, s_star=s, n_values=[10, 40], uniform=True,
                          model=SimpleNamespace(d=2), counts=[3, 3], n_boot=20, seed=0, t1=10.0)
    with pytest.warns(metrics.ResolutionWarning, match=r"1 of 6 .* start at or above delta .*at n = \[10\]"):
        b = breakdown(ts, amp, amp[..., 0], cfg)
    above = np.zeros((1, 2, 3), np.int8)
    above[0, 0, 2] = 1
    np.testing.assert_array_equal(b["above"], above)
    assert b["td"][0, 0, 2] == 0.0 and np.isnan(b["pred"][0, 0, 2]) and np.isnan(b["z"][0, 0, 2])
    keep = above == 0
    # the other runs: measured = predicted (exact exponentials), log(delta / A0) / sigma
    np.testing.assert_allclose(b["td"][keep], (np.log(0.1 / a0) / s)[keep[0]], rtol=1e-12)
    np.testing.assert_allclose(b["pred"][keep], b["td"][keep], rtol=1e-12)
    assert np.all(np.isfinite(b["z"][keep]))
