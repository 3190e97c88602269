"""Crash tests of resumable sweeps: SIGKILL the parent, SIGKILL one worker, corrupt cells.

Each scenario ends with the same check: the resumed sweep equals an uninterrupted serial
run bit for bit (``xr.testing.assert_identical``). Linux only (reads /proc for the pool's
processes).
"""

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest
import xarray as xr

from metrics import CellWarning, run_sweep
from metrics._runs.integrity import StoreIndex

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc (Linux)")

ROOT = pathlib.Path(__file__).resolve().parents[2]
GRID = {"beta": [0.5, 1.0, 2.0]}
# cells of ~0.3 s each: long enough to kill a sweep in the middle
KW = dict(n_seeds=2, t1=8.0, dt=0.01, n_saves=3, metrics=["n_clusters", "energy_multi"])

DRIVER = textwrap.dedent(
    """
    import sys
    from metrics import run_sweep
    ds = run_sweep({grid!r}, engine="process", max_workers=2, store=sys.argv[1], **{kw!r})
    ds.to_netcdf(sys.argv[2])
    """
)


@pytest.fixture(scope="module")
def reference():
    return run_sweep(GRID, **KW)


def _children(pid):
    """(pid, cmdline) of the direct children of ``pid``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
            cmd = pathlib.Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append((int(entry), cmd))
    return out


def _alive(pid):
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited


def _start(store, out):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    script = DRIVER.format(grid=GRID, kw=KW)
    return subprocess.Popen([sys.executable, "-c", script, str(store), str(out)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for_cells(proc, store, at_least, timeout=120.0):
    """Wait until ``at_least`` cell files exist and the pool's workers are up; return the workers."""
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        assert proc.poll() is None, proc.stderr.read().decode()
        workers = [pid for pid, cmd in _children(proc.pid) if "spawn_main" in cmd]
        if len(list(store.glob("cell_*.nc"))) >= at_least and workers:
            return workers
        time.sleep(0.02)
    raise AssertionError("the sweep did not start writing cells in time")


def test_sigkill_parent_then_corrupt_and_resume(tmp_path, reference):
    store = tmp_path / "cells"
    proc = _start(store, tmp_path / "out.nc")
    _wait_for_cells(proc, store, at_least=1)
    family = [pid for pid, _ in _children(proc.pid)]
    assert family
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    t_end = time.monotonic() + 5.0
    while any(_alive(pid) for pid in family) and time.monotonic() < t_end:
        time.sleep(0.05)
    assert [pid for pid in family if _alive(pid)] == []  # 0 processes alive 5 s after the parent died
    n_written = len(list(store.glob("cell_*.nc")))
    assert 1 <= n_written < 6  # killed mid-run

    # resume: only the missing cells are computed, and nothing is lost
    resumed = run_sweep(GRID, store=store, **KW)
    xr.testing.assert_identical(resumed, reference)

    # corrupt: NaN values under the old checksum, another cell's file under this name,
    # a truncated file, and a part file whose writer is dead
    cells = sorted(store.glob("cell_*.nc"))
    assert len(cells) == 6
    with xr.open_dataset(cells[0]) as ds:
        ds = ds.load()
    ds["energy_multi"][:] = np.nan
    ds.to_netcdf(cells[0])
    shutil.copyfile(cells[2], cells[1])
    truncated = cells[3].read_bytes()[:200]
    cells[3].write_bytes(truncated)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = store / f"{cells[4].name}.part{int(dead.stdout)}"
    stale.write_bytes(b"half a cell")
    StoreIndex(store).record(cells[4].name, "", stale.name)  # (only a part the index records is headflow's)
    with pytest.warns(CellWarning) as record:
        again = run_sweep(GRID, store=store, **KW)
    messages = " ".join(str(w.message) for w in record)
    # (the copied cell fails the digest the store's index records for its name before its key is read)
    assert messages.count("checksum") == 2 and "cannot be read" in messages
    for cell in (cells[0], cells[1], cells[3]):
        assert cell.name in messages
    assert len(record) == 3  # the three broken cells, no false alarm
    assert not stale.exists()
    # the unreadable file was not headflow's to delete: its bytes are kept beside the recomputed cell
    assert (store / f"{cells[3].name}.unreadable").read_bytes() == truncated
    assert (store / f"{cells[0].name}.unreadable").exists() and (store / f"{cells[1].name}.unreadable").exists()
    xr.testing.assert_identical(again, reference)
    # and the recomputed files verify: a third run warns about nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error", CellWarning)
        xr.testing.assert_identical(run_sweep(GRID, store=store, **KW), reference)


def test_sigkill_one_worker(tmp_path, reference):
    store = tmp_path / "cells"
    out = tmp_path / "out.nc"
    proc = _start(store, out)
    workers = _wait_for_cells(proc, store, at_least=1)
    os.kill(workers[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err.decode()  # the pool was restarted for the unfinished cells
    with xr.open_dataset(out) as ds:
        xr.testing.assert_identical(ds.load(), reference)
    assert len(list(store.glob("cell_*.nc"))) == 6


class _CountsPickles:
    """A large shared argument stand-in: counts how often this process pickles it."""

    pickled = 0

    def __init__(self, payload):
        self.payload = payload

    def __getstate__(self):
        type(self).pickled += 1
        return {"payload": self.payload}


def _payload_sum(shared, i):
    return float(shared.payload.sum()) + i


def test_pool_sends_the_shared_argument_once_per_worker():
    """Twelve jobs on two workers: the shared object is pickled at most once per worker start (not per
    job), and each job still sees it."""
    from metrics._runs.executors import run_pool

    shared = _CountsPickles(np.arange(1000.0))
    out = {}
    run_pool(list(range(12)), lambda i: (_payload_sum, shared, i), out.__setitem__, 2, 0, shared=shared)
    assert out == {i: 499500.0 + i for i in range(12)}
    assert 1 <= _CountsPickles.pickled <= 2


def _faults_of_freed_arrays(job=None) -> int:
    """Page faults of allocating and freeing three 1 MiB arrays 50 times (after 3 warm-up rounds)."""
    import resource

    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    for _ in range(3):
        arrays = [np.ones(2**17) for _ in range(3)]
        del arrays
    start = faults()
    for _ in range(50):
        arrays = [np.ones(2**17) for _ in range(3)]
        del arrays
    return faults() - start


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(os, "confstr"), reason="glibc's mallopt")
def test_pool_workers_reuse_the_memory_they_free():
    """A pool worker keeps the memory it frees (metrics._runs.executors.keep_freed_memory): state-sized arrays
    freed and allocated again cost a fresh process a page fault per page (glibc gives its heap top back
    to the kernel), and a worker almost none."""
    from metrics._runs.executors import _MALLOC_ENV, run_pool

    try:
        if not os.confstr("CS_GNU_LIBC_VERSION") or any(k in os.environ for k in _MALLOC_ENV):
            pytest.skip("not glibc, or malloc tuned by the environment")
    except (ValueError, OSError):
        pytest.skip("not glibc")
    code = "from tests.metrics.test_sweep_crash import _faults_of_freed_arrays as f; print(f())"
    fresh = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                               cwd=pathlib.Path(__file__).parents[2]).stdout)
    if fresh < 50 * 256:  # 3 MiB = 768 pages per round where the heap top is trimmed
        pytest.skip(f"this allocator does not give the freed arrays back to the kernel ({fresh} faults)")
    out = {}
    run_pool([0], lambda i: (_faults_of_freed_arrays, i), out.__setitem__, 1, 0)
    assert out[0] < fresh / 20


def _worker_threads(job=None) -> int:
    import particles

    return particles.num_threads()


def test_pool_workers_use_one_thread_each(monkeypatch):
    """The pool's processes share the cores: each runs its compiled passes on one thread
    (particles.num_threads), even where BLAS and the CPUs would allow more."""
    from metrics._runs.executors import run_pool

    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "2")  # the spawned workers inherit the environment
    monkeypatch.delenv("HEADFLOW_NUM_THREADS", raising=False)
    out = {}
    run_pool([0, 1], lambda i: (_worker_threads, i), out.__setitem__, 2, 0)
    assert out == {0: 1, 1: 1}
