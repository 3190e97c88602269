"""Sweeps: labelled output, reproducible seeds, resume after a kill, engines agree."""

import json

import numpy as np
import pytest
import xarray as xr

from metrics import SweepModel, run_sweep
from particles import InvalidParameterError

GRID = {"n_particles": [6, 10], "beta": [0.5, 3.0]}
KW = dict(n_seeds=2, t1=2.0, dt=0.05, n_saves=3, metrics=("n_clusters", "energy_multi"))


def test_sweep_dataset_and_reproducibility(tmp_path):
    ds = run_sweep(GRID, **KW)
    assert ds.n_clusters.dims == ("n_particles", "beta", "seed", "time")
    assert ds.n_clusters.attrs["long_name"] and ds.beta.attrs["long_name"] == "inverse temperature"
    assert ds.attrs["seed_entropy"] == "0"
    again = run_sweep(GRID, **KW)
    xr.testing.assert_identical(ds, again)
    other = run_sweep({"n_particles": [6], "beta": [3.0]}, **KW)  # same seed index → same cell
    xr.testing.assert_allclose(other.n_clusters.isel(n_particles=0, beta=0), ds.n_clusters.sel(n_particles=6, beta=3.0))
    assert np.all(ds.n_clusters.isel(time=0) == ds.n_particles)  # distinct initial tokens
    ds.to_netcdf(tmp_path / "s.nc")
    with xr.open_dataset(tmp_path / "s.nc") as back:
        xr.testing.assert_identical(back.load(), ds)


def test_resume_after_kill(tmp_path, monkeypatch):
    from metrics._runs import sweep

    store = tmp_path / "cells"
    calls = {"n": 0}
    real = sweep.simulate

    def dying(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("worker killed")
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep, "simulate", dying)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(GRID, store=store, **KW)
    finished = sorted(store.glob("cell_*.nc"))
    assert len(finished) == 2 and not list(store.glob("*.part*"))
    calls["n"] = -100  # no more deaths
    resumed = run_sweep(GRID, store=store, **KW)
    assert calls["n"] == -100 + 6  # only the 6 missing cells were computed
    monkeypatch.setattr(sweep, "simulate", real)
    xr.testing.assert_identical(resumed, run_sweep(GRID, **KW))


def test_process_engine_matches_serial():
    xr.testing.assert_identical(run_sweep(GRID, engine="process", max_workers=2, **KW), run_sweep(GRID, **KW))


def test_dask_engine_matches_serial():
    import distributed

    # a free port and not the default client: the test leans on no machine state and leaves none behind
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=":0",
                            set_as_default=False) as client:
        xr.testing.assert_identical(run_sweep(GRID, engine=client, **KW), run_sweep(GRID, **KW))


def test_sweep_bad_input():
    with pytest.raises(InvalidParameterError, match=r"grid. parameter of run_sweep has unknown key\(s\)"):
        run_sweep({"temperature": [1.0]})
    with pytest.raises(InvalidParameterError, match=r"'metrics\[0\]' parameter of run_sweep must be one of"):
        run_sweep(GRID, metrics=("nope",))
    with pytest.raises(InvalidParameterError, match="engine.* must be one of .serial., .process. or a dask"):
        run_sweep({"beta": [1.0]}, t1=0.1, dt=0.05, engine="mpi")


def test_overflowing_cell_is_recorded_not_fatal():
    # USA at beta = 100 without log-time rescaling overflows: that cell fails, the sweep goes on
    from metrics import FailedCellWarning

    with pytest.warns(FailedCellWarning, match=r"1 of 2 cells did not reach t1.*'beta': 100.0.*overflows float64"):
        ds = run_sweep({"kind": ["usa"], "beta": [0.5, 100.0]}, n_seeds=1, t1=0.5, dt=0.05, n_saves=3,
                       metrics=("n_clusters",))
    assert ds.success.sel(beta=0.5).item() == 1 and ds.success.sel(beta=100.0).item() == 0
    # the solver's reason is in the dataset, beside success, and in the failed_cells attr
    assert ds.failure_message.sel(beta=0.5).item() == ""
    assert "overflows float64" in ds.failure_message.sel(beta=100.0).item()
    failed = json.loads(ds.attrs["failed_cells"])
    assert [(f["params"]["beta"], f["seed"]) for f in failed] == [(100.0, 0)]
    assert np.all(np.isfinite(ds.n_clusters.sel(beta=0.5)))
    assert np.all(np.isnan(ds.n_clusters.sel(beta=100.0).isel(time=slice(1, None))))


def test_sweep_grid_validation():
    with pytest.raises(InvalidParameterError,
                       match=r"grid\['kind'\]\" parameter of run_sweep must be a list of values"):
        run_sweep({"kind": "softmax"})
    with pytest.raises(InvalidParameterError,
                       match=r"The \"grid\['beta'\]\" parameter of run_sweep values must each be "
                             r"a real number in \[0, inf\); got -1.0"):
        run_sweep({"beta": [-1.0]})
    with pytest.raises(InvalidParameterError, match=r"grid\['d'\]\" parameter of run_sweep repeats a value"):
        run_sweep({"d": [3, 3]})
    with pytest.raises(InvalidParameterError, match=r"'grid' parameter of run_sweep has unknown key\(s\) \['temp'\]"):
        run_sweep({"temp": [1.0]})
    with pytest.raises(InvalidParameterError, match=r"'metrics' parameter of run_sweep must be a sequence of values, .*"
                                                     r"got 'n_clusters' \(str\)\. Name them in a list"):
        run_sweep({"beta": [1.0]}, metrics="n_clusters")


def test_sweep_model_refuses_a_cell_parameter_as_an_option():
    # kind and beta are each cell's: as options they would collide with the cell's own
    with pytest.raises(InvalidParameterError, match="'kind' parameter of SweepModel.*sweep it in run_sweep's grid"):
        SweepModel(kind="usa")
    with pytest.raises(InvalidParameterError, match="'colour' parameter of SweepModel is not one of its options"):
        SweepModel(colour="red")
