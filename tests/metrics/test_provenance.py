"""Provenance and CF attributes of every dataset headflow writes; netCDF and zarr round trips."""

import json

import numpy as np
import pytest
import xarray as xr

import metrics
import particles
from particles import MultiHead, SaveAt, __version__, diagnostics_fn, sample_uniform, simulate

cf_xarray = pytest.importorskip("cf_xarray")  # in the "test" extra
from cf_xarray.units import units as cf_units  # noqa: E402  (needs pint, also in "test")


@pytest.fixture(scope="module")
def datasets():
    rng = np.random.default_rng(7)
    model = MultiHead.scalar([1.0, 0.5], d=3, beta=1.0, kind="usa")
    traj = simulate(sample_uniform(8, d=3, rng=rng), model, t1=0.4, dt=0.1,
                    save=SaveAt(ts=np.linspace(0, 0.4, 3), fn=diagnostics_fn(model)))
    run = metrics.trajectory_to_dataset(traj, model, config={"n": 8, "kappa": np.inf}, seeds={"x0": 7})
    sweep = metrics.run_sweep({"n_particles": [4, 6]}, n_seeds=2, t1=0.2, dt=0.1, n_saves=2)
    model2 = MultiHead.scalar([1.0], d=2, beta=1.0, kind="usa")
    study = metrics.mean_field_limit_study(model2, lambda x: 1 + 0.5 * x[:, 0], n_values=(4, 8), n_seeds=1,
                                           t1=0.1, n_saves=2, m_grid=64, dt=0.05)
    return {"trajectory": run, "sweep": sweep, "study": study}


KINDS = ["trajectory", "sweep", "study"]


@pytest.mark.parametrize("kind", KINDS)
def test_provenance_attrs(datasets, kind):
    ds = datasets[kind]
    versions = json.loads(ds.attrs["versions"])
    assert versions["headflow"] == __version__ == ds.attrs["headflow_version"]
    for dep in ("numpy", "scipy", "pot", "xarray", "scikit-learn", "python"):
        assert versions[dep] not in ("", "not installed"), dep
    config = json.loads(ds.attrs["config"])
    assert config and json.loads(ds.attrs["seeds"])
    assert ds.attrs["summation"] == "auto"  # the MultiHead default
    assert ds.attrs["summation_error_bound"] == ds.attrs["summation_tol"] == particles.summation.DEFAULT_TOL
    assert ds.attrs["source"] == f"headflow {__version__}"


def test_config_is_the_full_config(datasets):
    run, sweep, study = (datasets[k] for k in KINDS)
    assert json.loads(run.attrs["config"]) == {"n": 8, "kappa": float("inf")}
    assert json.loads(run.attrs["seeds"]) == {"x0": 7}
    cfg = json.loads(sweep.attrs["config"])
    assert cfg["grid"] == {"n_particles": [4, 6]} and cfg["n_seeds"] == 2 and cfg["dt"] == 0.1
    assert cfg["model_fn"] == "metrics.sweep.default_model"
    cfg = json.loads(study.attrs["config"])
    assert cfg["n_values"] == [4, 8] and cfg["m_grid"] == 64 and cfg["model"]["beta"] == 1.0


@pytest.mark.parametrize("kind", KINDS)
def test_cf_attributes(datasets, kind):
    ds = datasets[kind]
    assert ds.attrs["Conventions"] == metrics.CONVENTIONS and ds.attrs["Conventions"].startswith("CF-")
    for name in list(ds.data_vars) + list(ds.coords):
        attrs = ds[name].attrs
        assert attrs.get("long_name") and "units" in attrs, name
        # every units string parses in cf-xarray's UDUNITS registry, as a dimensionless quantity
        # or an angle: "nat" would parse as nano-technical-atmospheres, a pressure
        unit = cf_units.Unit(attrs["units"])
        assert unit.dimensionless, (name, attrs["units"], unit)
    # headflow sets no CF standard_name: none of its quantities has one in the CF table
    assert ds.cf.standard_names == {} and not ds.cf.cell_measures


def test_cf_check_rejects_a_bad_unit(datasets):
    bad = datasets["trajectory"].copy()
    bad["entropy"] = bad["entropy"].assign_attrs(units="nat")
    assert not cf_units.Unit(bad["entropy"].attrs["units"]).dimensionless


@pytest.mark.parametrize("kind", KINDS)
def test_netcdf_round_trip(datasets, kind, tmp_path):
    ds = datasets[kind]
    ds.to_netcdf(tmp_path / "x.nc")
    with xr.open_dataset(tmp_path / "x.nc") as back:
        xr.testing.assert_identical(back.load(), ds)


@pytest.mark.parametrize("kind", KINDS)
def test_zarr_round_trip(datasets, kind, tmp_path):
    pytest.importorskip("zarr")  # in the "test" extra; skipped only without it
    ds = datasets[kind]
    ds.to_zarr(tmp_path / "x.zarr", consolidated=False)  # consolidated metadata is not in the zarr v3 spec
    with xr.open_zarr(tmp_path / "x.zarr", consolidated=False) as back:
        xr.testing.assert_identical(back.load(), ds)


def test_exact_summation_is_recorded_with_bound_zero():
    model = MultiHead.scalar([1.0], d=3, beta=1.0, summation="exact")
    traj = simulate(sample_uniform(4, d=3, rng=0), model, t1=0.1, dt=0.05)
    ds = metrics.trajectory_to_dataset(traj, model)
    assert ds.attrs["summation"] == "exact" and ds.attrs["summation_error_bound"] == 0.0


def test_summation_paths_reports_finufft():
    paths = metrics.summation_paths(check_import=True)
    assert paths["exact"] is True and isinstance(paths["finufft"], bool)
    try:
        from particles._summation.routes import _finufft

        _finufft()  # (its import, without numpy < 1.25's distutils warning)
    except ImportError:
        assert paths["finufft"] is False
    else:
        assert paths["finufft"] is True
