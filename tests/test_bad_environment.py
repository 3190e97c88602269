"""Bad environments of sweeps and studies: the store on the filesystem, and the worker processes.

Filesystem: the store is a file, a path through a file, a read-only folder, a folder of unrelated
netCDF files, a cell written by another headflow version. Processes: a script without a main guard,
an unpicklable model_fn, a worker that dies every time, a dask worker that dies once (the scheduler
retries the cell) and always (a clear error). Each case ends in the library's own error naming the
cause, or in the same dataset as an undisturbed serial run.
"""

import multiprocessing
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import xarray as xr

from metrics import CellWarning, default_model, mean_field_limit_study, run_sweep
from metrics._runs.integrity import INDEX_NAME
from particles import MultiHead, SolverError
from particles.validation import InvalidParameterError

ROOT = pathlib.Path(__file__).resolve().parents[1]
GRID = {"beta": [0.5, 1.0]}
KW = dict(n_seeds=1, t1=0.1, dt=0.05, n_saves=2, metrics=["energy_multi"])


@pytest.fixture(scope="module")
def reference():
    return run_sweep(GRID, **KW)


# ------------------------------------------------------------------ filesystem
def test_store_that_is_a_file(tmp_path):
    f = tmp_path / "cells.nc"
    f.write_bytes(b"not a folder")
    with pytest.raises(InvalidParameterError, match=r"'store' .* existing file"):
        run_sweep(GRID, store=f, **KW)
    with pytest.raises(InvalidParameterError, match=r"'store' folder .* cannot be created"):
        run_sweep(GRID, store=f / "sub", **KW)
    assert f.read_bytes() == b"not a folder"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc (Linux)")
def test_store_that_is_read_only():
    # /proc/self is a folder in which nobody, root included, can create a file
    with pytest.raises(InvalidParameterError, match=r"'store' folder .* not writable"):
        run_sweep(GRID, store="/proc/self", **KW)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores folder permissions")
def test_store_without_write_permission(tmp_path):
    store = tmp_path / "cells"
    store.mkdir()
    store.chmod(0o500)
    try:
        with pytest.raises(InvalidParameterError, match=r"'store' folder .* not writable"):
            run_sweep(GRID, store=store, **KW)
    finally:
        store.chmod(0o700)


def test_store_with_unrelated_netcdf_files(tmp_path, reference):
    store = tmp_path / "cells"
    store.mkdir()
    other = xr.Dataset({"a": ("t", np.arange(3.0))}, attrs={"title": "someone else's data"})
    others = [store / "results.nc", store / "cell_notes.nc", store / "cell_0123456789abcdef.nc.bak"]
    for path in others:
        other.to_netcdf(path)
    before = {p: p.read_bytes() for p in others}
    with warnings.catch_warnings():
        warnings.simplefilter("error", CellWarning)  # they are not cells of this sweep: no false alarm
        ds = run_sweep(GRID, store=store, **KW)
    xr.testing.assert_identical(ds, reference)
    assert {p: p.read_bytes() for p in others} == before  # left alone
    assert len(list(store.glob("cell_*.nc"))) == 2 + 1  # two cells, and the unrelated cell_notes.nc


def test_cell_from_another_library_version_is_recomputed(tmp_path, reference):
    store = tmp_path / "cells"
    run_sweep(GRID, store=store, **KW)
    cell = sorted(store.glob("cell_*.nc"))[0]
    with xr.open_dataset(cell) as ds:
        ds = ds.load()
    assert ds.attrs["headflow_version"]
    # same key and a valid checksum: only the version tells it apart (a store of a version before the
    # store's index, so no recorded digest; the cell's own content_sha256 covers its values)
    ds.attrs["headflow_version"] = "0.0.1"
    ds.to_netcdf(cell)
    (store / INDEX_NAME).unlink()
    with pytest.warns(CellWarning, match=r"written by headflow 0\.0\.1") as record:
        again = run_sweep(GRID, store=store, **KW)
    assert len(record) == 1 and cell.name in str(record[0].message)
    xr.testing.assert_identical(again, reference)
    with xr.open_dataset(cell) as ds:
        assert ds.attrs["headflow_version"] != "0.0.1"  # rewritten by this version


# ------------------------------------------------------------------ processes
NO_GUARD = textwrap.dedent(
    """
    from metrics import run_sweep
    ds = run_sweep({"beta": [1.0]}, t1=0.1, dt=0.05, n_saves=2, engine="process", max_workers=1)
    """
)


def test_script_without_main_guard(tmp_path):
    script = tmp_path / "sweep_script.py"
    script.write_text(NO_GUARD)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    # the parent says why its workers died, once (no pool restarts), and the worker says it too
    assert "workers died while starting" in proc.stderr and 'if __name__ == "__main__":' in proc.stderr
    assert "broke" not in proc.stderr
    assert "was called while a worker process was importing the main script" in proc.stderr
    assert str(script) in proc.stderr


@pytest.mark.parametrize("call", ["sweep", "study"])
def test_process_engine_refused_while_importing_the_main_script(monkeypatch, call):
    # what a spawned worker sees while it re-imports an unguarded script: refused before any work
    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    with pytest.raises(InvalidParameterError, match="while a worker process was importing the main script"):
        if call == "sweep":
            run_sweep(GRID, engine="process", **KW)
        else:
            mean_field_limit_study(MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax"), _first_coordinate,
                                   n_values=(16, 32), engine="process")


def test_unpicklable_model_fn_is_refused_before_work(tmp_path):
    store = tmp_path / "cells"
    with pytest.raises(InvalidParameterError, match=r"'model_fn' .* picklable"):
        run_sweep(GRID, engine="process", model_fn=lambda p, r: default_model(p, r), store=store, **KW)
    assert not list(store.glob("cell_*"))


def _in_worker() -> bool:
    # run_sweep also builds the first cell's model in the calling process (a check before any work)
    return multiprocessing.parent_process() is not None


def _suicidal_model(params, rng):
    if _in_worker():
        os.kill(os.getpid(), signal.SIGKILL)
    return default_model(params, rng)


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_worker_that_always_dies():
    with pytest.raises(SolverError, match="pool broke 1 times .* 2 cells are unfinished"):
        run_sweep(GRID, engine="process", max_workers=1, max_pool_restarts=0, model_fn=_suicidal_model, **KW)


class _DiesOnce:
    """model_fn that kills its worker process the first time it runs (a marker file remembers)."""

    def __init__(self, marker):
        self.marker = str(marker)
        self.__qualname__ = "DiesOnce"

    def __call__(self, params, rng):
        if _in_worker() and not os.path.exists(self.marker):
            pathlib.Path(self.marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return default_model(params, rng)


@pytest.fixture
def dask_cluster():
    import dask
    import distributed

    def make(allowed_failures):
        with dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures}):
            cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                               dashboard_address=":0", silence_logs=50)
        return cluster, distributed.Client(cluster, set_as_default=False)  # no port or default client shared

    made, environ = [], dict(os.environ)
    yield lambda allowed_failures: made.append(make(allowed_failures)) or made[-1][1]
    for cluster, client in made:
        client.close()
        cluster.close()
    # distributed's nanny exports its pre-spawn environment (MALLOC_TRIM_THRESHOLD_, ...) into this process:
    # put it back, so that no later test runs in an environment this one left behind
    os.environ.clear()
    os.environ.update(environ)


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_dask_worker_killed_once_is_retried(tmp_path, dask_cluster, reference):
    client = dask_cluster(1)
    model_fn = _DiesOnce(tmp_path / "died")
    ds = run_sweep(GRID, engine=client, model_fn=model_fn, **KW)
    assert (tmp_path / "died").exists()  # a worker did die
    xr.testing.assert_identical(ds.drop_attrs(), run_sweep(GRID, model_fn=model_fn, **KW).drop_attrs())
    xr.testing.assert_allclose(ds.drop_attrs(), reference.drop_attrs())


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_dask_worker_that_always_dies(dask_cluster):
    client = dask_cluster(0)
    with pytest.raises(SolverError, match="dask workers died running the cell"):
        run_sweep(GRID, engine=client, model_fn=_suicidal_model, **KW)


def _first_coordinate(points):
    """A density on S^1 (picklable: module level), 1 + x_1 / 2."""
    return 1 + 0.5 * points[:, 0]
