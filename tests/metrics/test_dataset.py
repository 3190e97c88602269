"""xarray schema, netCDF round trip, the ds.attn accessor."""

import numpy as np
import pytest
import xarray as xr

import metrics
from particles import MultiHead, SaveAt, diagnostics_fn, sample_uniform, simulate
from tests.helpers import random_symmetric


@pytest.fixture
def dataset(rng):
    model = MultiHead(random_symmetric(rng, 2, 3), beta=1.5, kind="usa")
    traj = simulate(sample_uniform(12, d=3, rng=rng), model, t1=2.0, dt=0.002,
                    save=SaveAt(ts=np.linspace(0, 2, 5), fn=diagnostics_fn(model)))
    return metrics.trajectory_to_dataset(traj, model), model


def test_schema(dataset):
    ds, model = dataset
    assert ds.positions.dims == ("time", "particle", "component")
    assert ds.entropy.dims == ("time", "head", "particle")
    for name in list(ds.data_vars) + list(ds.coords):
        assert "long_name" in ds[name].attrs and "units" in ds[name].attrs, name
    for key in ("title", "source", "history", "beta", "kind", "M"):
        assert key in ds.attrs
    assert ds.attrs["beta"] == 1.5 and ds.attrs["score_symmetric"] == 1
    assert ds.positions.dtype == np.float64


def test_netcdf_round_trip_identical(dataset, tmp_path):
    ds, _ = dataset
    ds.to_netcdf(tmp_path / "t.nc")
    with xr.open_dataset(tmp_path / "t.nc") as back:
        xr.testing.assert_identical(back.load(), ds)


def test_accessor(dataset):
    ds, model = dataset
    rebuilt = ds.attn.model
    np.testing.assert_array_equal(rebuilt.M, model.M)
    np.testing.assert_allclose(ds.attn.energy().values, ds.energy_multi.values, rtol=1e-13)
    nc = ds.attn.n_clusters()
    assert nc.dims == ("time",) and nc.attrs["units"] == "1" and int(nc[0]) == 12
    assert ds.attn.wasserstein_between(0.0, 0.0) == pytest.approx(0.0, abs=1e-12)
    assert ds.attn.wasserstein_between(0.0, 2.0) > 0


def test_accessor_schema_errors(dataset):
    ds, _ = dataset
    with pytest.raises(ValueError, match="needs a 'positions' variable"):
        ds.drop_vars("positions").attn.n_clusters()
    with pytest.raises(ValueError, match="attrs lack the model's record \\('matrix_shape'"):
        ds.drop_attrs().attn.model
