"""The fault suite: each case breaks a run or a stored file the way a machine does and asserts the outcome
docs/guide/reliability.md promises.

- damaged bytes (default suite): a flipped and a truncated byte in every stored kind (a netCDF output, a
  zarr chunk, a cell, a cached reference, a line of a store's index), each detected by ``metrics.verify``
  and by the next resume, which rebuilds from what verifies;
- kills (slow): SIGKILL, SIGTERM and SIGINT at seeded random moments of ``headflow sweep``, ``study`` and
  ``simulate`` and of a ``run_sweep`` script, on netCDF and zarr, then a resume whose data equal an
  uninterrupted run's;
- full disks and size limits (slow): ``RLIMIT_FSIZE`` in a subprocess (``SIGXFSZ`` ignored) hit by a cell,
  an output and a study's reference: one message naming the file, the finished cells kept;
- concurrency (slow): two processes on one store, and a reader of an output during its rewrite.

Linux only (signals, resource limits).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import xarray as xr

import metrics
from headflow import cli
from metrics import CellWarning, mean_field_limit_study
from metrics._runs.integrity import INDEX_NAME
from metrics.io import open_whole
from particles import MultiHead
from tests.test_cli import SIM, SWEEP

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="signals and resource limits of Linux")

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


STUDY_KW = dict(n_values=(8, 16), n_seeds=1, t1=0.1, n_saves=2, m_grid=64, dt=0.1, n_boot=20, reference="fv_circle")
S1 = MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax")


def _density(x):
    return 1 + 0.5 * x[:, 0]


def _data(ds: xr.Dataset) -> xr.Dataset:
    """The data of a result, without the attrs that record when and how long it ran."""
    return ds.drop_attrs()


def _cli(*argv) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        return cli.main([*map(str, argv), "--no-progress"])


# ---------------------------------------------------------------------------------------------------------------
# damaged bytes: every stored kind, flipped and truncated, detected by verify and by the next resume

@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A sweep's netCDF and zarr outputs with their stores, and a limit study's store with its cached reference."""
    root = tmp_path_factory.mktemp("pristine")
    (root / "sweep.toml").write_text(SWEEP)
    assert _cli("sweep", root / "sweep.toml", "--out", root / "s.nc") == 0
    assert _cli("sweep", root / "sweep.toml", "--out", root / "s.zarr", "--format", "zarr") == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mean_field_limit_study(S1, _density, store=root / "study", progress=False, **STUDY_KW)
    return root


def _flip(path: pathlib.Path, at: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if at is None else at] ^= 0x10
    path.write_bytes(bytes(data))


def _flip_value(path: pathlib.Path, values: np.ndarray) -> None:
    """Flip one bit inside the stored bytes of ``values`` (a flip in HDF5's free space would change nothing)."""
    at = path.read_bytes().find(np.ascontiguousarray(values).tobytes()[:16])
    assert at >= 0
    _flip(path, at + 3)


def _truncate(path: pathlib.Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _damage(root: pathlib.Path, kind: str, how: str) -> tuple[pathlib.Path, pathlib.Path]:
    """Damage one file of ``kind``; return (what verify checks, the damaged file)."""
    if kind == "netcdf_output":
        target = root / "s.nc"
        values = xr.load_dataset(target).energy_multi.values
        checked = target
    elif kind == "zarr_chunk":
        checked = root / "s.zarr"
        target = next(p for p in sorted((checked / "energy_multi").rglob("*")) if p.is_file() and "json" not in p.name
                      and not p.name.startswith("."))
        values = None
    elif kind == "cell":
        checked = root / "s.nc.cells"
        target = sorted(checked.glob("cell_*.nc"))[0]
        values = xr.load_dataset(target).energy_multi.values
    elif kind == "reference":
        checked = root / "study"
        (target,) = checked.glob("reference_*.nc")
        values = xr.load_dataset(target)["mass"].values
    else:  # index_line
        checked = root / "s.nc.cells"
        target = checked / INDEX_NAME
        values = None
    if how == "truncate" and kind == "index_line":  # a torn last append
        data = target.read_bytes()
        target.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 40])
    elif how == "truncate":
        _truncate(target)
    elif values is not None:
        _flip_value(target, values)
    else:
        _flip(target)
    return checked, target


KINDS = ("netcdf_output", "zarr_chunk", "cell", "reference", "index_line")


@pytest.mark.parametrize("how", ["flip", "truncate"])
@pytest.mark.parametrize("kind", KINDS)
def test_damage_in_every_stored_kind_is_detected_and_rebuilt(pristine, tmp_path, capsys, kind, how):
    root = tmp_path / "r"
    shutil.copytree(pristine, root)
    checked, target = _damage(root, kind, how)
    report = metrics.verify(checked)
    assert not report.ok and target.name in str(report)
    capsys.readouterr()
    if kind == "reference":  # the study's next run: the reference rebuilt, its damaged bytes kept
        damaged = target.read_bytes()
        with pytest.warns(CellWarning, match=f"cached reference {target.name}.*kept as {target.name}.unreadable"):
            again = mean_field_limit_study(S1, _density, store=checked, progress=False, **STUDY_KW)
        assert again.attrs["reference_cached"] == 0 and (checked / f"{target.name}.unreadable").read_bytes() == damaged
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fresh = mean_field_limit_study(S1, _density, store=None, progress=False, **STUDY_KW)
        np.testing.assert_array_equal(again.w1.values, fresh.w1.values)
        assert metrics.verify(checked).ok
        return
    fmt = ["--format", "zarr"] if kind == "zarr_chunk" else []
    out = root / ("s.zarr" if kind == "zarr_chunk" else "s.nc")
    good = open_whole(pristine / out.name)
    if kind in ("cell", "index_line"):
        out.unlink()  # the next resume of the store
    if kind == "netcdf_output" and how == "truncate":  # its attrs are gone too: nothing says headflow wrote it
        damaged = out.read_bytes()
        assert _cli("sweep", root / "sweep.toml", "--out", out) == 2
        assert "is not a netcdf dataset written by a headflow command" in capsys.readouterr().err
        assert out.read_bytes() == damaged  # never replaced; moved away, the store rebuilds it
        out.rename(root / "moved.nc")
    assert _cli("sweep", root / "sweep.toml", "--out", out, *fmt) == 0
    said = capsys.readouterr()
    if kind in ("netcdf_output", "zarr_chunk"):  # rebuilt from the store's verified cells, the damaged bytes kept
        assert "0 computed" in said.out
        if (kind, how) != ("netcdf_output", "truncate"):
            assert f"'{out}' has this config but" in said.err and (root / f"{out.name}.unreadable").exists()
        xr.testing.assert_identical(_data(open_whole(out)), _data(good))
    elif kind == "cell":  # recomputed, its bytes kept
        assert f"CellWarning: sweep cell {target.name}" in said.err and "7 reused, 1 computed" in said.out
        assert (target.parent / f"{target.name}.unreadable").exists()
        xr.testing.assert_identical(_data(open_whole(out)), _data(good))
    else:  # a damaged line is ignored: every cell still verifies by its own checksum
        assert "CellWarning" not in said.err and "8 reused, 0 computed" in said.out
        xr.testing.assert_identical(_data(open_whole(out)), _data(good))
    assert metrics.verify(checked).ok and metrics.verify(out).ok


def _two_configs(folder: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """Two small simulate configs (6 and 5 tokens): the second one's --force rewrites the first one's output."""
    a, b = folder / "a.toml", folder / "b.toml"
    a.write_text(SIM)
    b.write_text(SIM.replace("n = 6", "n = 5"))
    return a, b


def test_a_zarr_rewrite_drops_the_old_store_only_once_the_new_one_holds_the_name(tmp_path, monkeypatch):
    """A folder cannot be renamed over: ``--force`` moves the old zarr output aside, renames the new one in,
    and only then removes the old one, so a kill between the two renames leaves both whole."""
    a, b = _two_configs(tmp_path)
    out = tmp_path / "s.zarr"
    assert _cli("simulate", a, "--out", out, "--format", "zarr") == 0
    seen, rmtree = [], shutil.rmtree

    def spy(path, *args, **kwargs):
        if ".old" in str(path):
            seen.append(open_whole(out).sizes["particle"] == 5 and open_whole(path).sizes["particle"] == 6)
        return rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", spy)
    assert _cli("simulate", b, "--out", out, "--format", "zarr", "--force") == 0
    assert seen == [True] and sorted(p.name for p in tmp_path.iterdir()) == ["a.toml", "b.toml", "s.zarr"]


@pytest.mark.skipif(int(__import__("zarr").__version__.split(".")[0]) < 3,
                    reason="zarr 2 has no chunk key encodings: a reader reopens after a rewrite (documented)")
def test_a_reader_holding_a_zarr_output_reads_its_own_generation_through_a_rewrite(tmp_path):
    """A reader opened (lazily) before a ``--force`` rewrite reads the output it opened, values and attrs, whole
    and checksummed, never the new chunks under its old attrs; a new reader reads the new output; the folder holds
    at most two generations, and a reader opened after the first rewrite survives the second."""
    a, _ = _two_configs(tmp_path)
    b = tmp_path / "b_beta.toml"  # the same shapes (another beta): new chunks would read as plausible numbers
    b.write_text(SIM.replace("beta = 1.0", "beta = 3.0"))
    out = tmp_path / "s.zarr"
    assert _cli("simulate", a, "--out", out, "--format", "zarr") == 0
    before = _data(open_whole(out))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (consolidated metadata of zarr 3: a note)
        held = xr.open_zarr(out, consolidated=None)
    assert _cli("simulate", b, "--out", out, "--format", "zarr", "--force") == 0
    xr.testing.assert_identical(_data(held.load()), before)
    assert held.attrs["beta"] == 1.0 and open_whole(out).attrs["beta"] == 3.0 and metrics.verify(out).ok
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        second = xr.open_zarr(out, consolidated=None)
    middle = _data(open_whole(out))
    assert _cli("simulate", a, "--out", out, "--format", "zarr", "--force") == 0
    xr.testing.assert_identical(_data(second.load()), middle)
    xr.testing.assert_identical(_data(open_whole(out)), before)
    chunks = [p for p in out.rglob("*") if p.is_file() and p.name != "zarr.json"]
    assert len(chunks) == 2 * len(list(out.glob("*/zarr.json")))  # one chunk per array and generation, two kept


# ---------------------------------------------------------------------------------------------------------------
# kills at seeded random moments, then a resume equal to an uninterrupted run (slow)

LONG = {
    "sweep": SWEEP.replace("t1 = 0.2", "t1 = 8.0").replace("dt = 0.1", "dt = 0.01"),
    "study": "[model]\nd = 2\nbeta = 1.0\nlambdas = [1.0]\n[study]\nn_values = [8, 16]\nn_seeds = 2\nt1 = 2.0\n"
             "n_saves = 3\nm_grid = 64\ndt = 0.001\n",
    "simulate": SIM.replace("t1 = 0.2", "t1 = 20.0").replace("dt = 0.05", "dt = 0.002"),
}

#: a user's script: a resumable run_sweep, its result written atomically (checksummed) in either format
SCRIPT = textwrap.dedent("""
    import pathlib, sys
    from metrics import run_sweep
    from metrics.io import atomic_write, checksum_encoding
    store, out, fmt = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
    ds = run_sweep({"beta": [0.5, 1.0, 2.0]}, n_seeds=2, t1=8.0, dt=0.01, n_saves=3,
                   metrics=["n_clusters", "energy_multi"], store=store, progress=False)
    enc = checksum_encoding(ds, fmt)
    if not out.exists():
        atomic_write(out, lambda p: ds.to_zarr(p, encoding=enc) if fmt == "zarr" else ds.to_netcdf(p, encoding=enc))
""")

COMMANDS = ("sweep", "study", "simulate", "script")
SIGNALS = {"SIGKILL": signal.SIGKILL, "SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT}


def _argv(cmd: str, folder: pathlib.Path, fmt: str) -> tuple[list, pathlib.Path, pathlib.Path | None]:
    """(the command's arguments after the interpreter, its output, its store or None)."""
    out = folder / ("out.zarr" if fmt == "zarr" else "out.nc")
    if cmd == "script":
        return ["-c", SCRIPT, str(folder / "store"), str(out), fmt], out, folder / "store"
    cfg = folder / f"{cmd}.toml"
    cfg.write_text(LONG[cmd])
    argv = ["-m", "headflow", cmd, str(cfg), "--out", str(out), "--no-progress", "--format", fmt]
    return argv, out, None if cmd == "simulate" else folder / f"{out.name}.cells"


def _run_in_process(argv: list) -> None:
    """The same run in this process (an uninterrupted run, or the resume)."""
    if argv[0] == "-c":
        saved = sys.argv
        sys.argv = ["script", *argv[2:]]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(compile(argv[1], "script", "exec"), {"__name__": "__main__"})
        finally:
            sys.argv = saved
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert cli.main(argv[2:]) == 0


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The data of each command's uninterrupted run, per format (computed once, on first use)."""
    cache = {}

    def get(cmd, fmt):
        if (cmd, fmt) not in cache:
            folder = tmp_path_factory.mktemp(f"whole_{cmd}_{fmt}")
            argv, out, _ = _argv(cmd, folder, fmt)
            _run_in_process(argv)
            cache[cmd, fmt] = _data(open_whole(out))
        return cache[cmd, fmt]

    return get


KILLS = [(cmd, fmt, sig) for cmd in COMMANDS for fmt in ("netcdf", "zarr") for sig in SIGNALS]


@pytest.mark.slow
@pytest.mark.parametrize("cmd, fmt, sig", KILLS)
def test_a_kill_at_a_random_moment_resumes_to_the_uninterrupted_result(tmp_path, uninterrupted, cmd, fmt, sig):
    """Killed at a seeded random moment of its life (from its imports to its output's rename): the output's
    name holds nothing or a whole verified output, the store's cells verify, and the resume gives the data of
    an uninterrupted run."""
    argv, out, store = _argv(cmd, tmp_path, fmt)
    delay = float(np.random.default_rng(KILLS.index((cmd, fmt, sig))).uniform(1.0, 9.0))
    proc = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        proc.wait(timeout=delay)  # (it may finish first: then the resume finds its output up to date)
    except subprocess.TimeoutExpired:
        proc.send_signal(SIGNALS[sig])
    _, err = proc.communicate(timeout=300)
    if sig == "SIGINT" and proc.returncode == 130:  # Ctrl-C in a command: one line, what was kept
        assert "interrupted" in err and "Traceback" not in err
    assert not out.exists() or metrics.verify(out).ok  # never a damaged file under the output's name
    if store is not None and store.exists():
        assert metrics.verify(store).ok
    _run_in_process(argv)
    xr.testing.assert_identical(_data(open_whole(out)), uninterrupted(cmd, fmt))
    assert metrics.verify(out).ok and (store is None or metrics.verify(store).ok)


# ---------------------------------------------------------------------------------------------------------------
# full disks and size limits: RLIMIT_FSIZE in a subprocess, SIGXFSZ ignored (slow)

_LIMITED = textwrap.dedent("""
    import resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
    {body}
""")
_CLI = "from headflow import cli\nsys.exit(cli.main(sys.argv[1:]))"
_STUDY = textwrap.dedent(f"""
    from metrics import mean_field_limit_study
    from metrics.io import DiskFullError
    from particles import MultiHead
    try:
        mean_field_limit_study(MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax"), lambda x: 1 + 0.5 * x[:, 0],
                               store=sys.argv[1], progress=False, **{STUDY_KW!r})
    except DiskFullError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
""")

LIMITS = {  # what the limit stops first: (command, size limit in bytes, the file it names, cells kept)
    "sweep_cell": ("sweep", 10_000, "out.nc.cells/cell_", 0),
    "sweep_output": ("sweep", 40_000, "out.nc'", 8),
    "simulate_output": ("simulate", 40_000, "out.nc'", None),
    "study_reference": ("study", 8_000, "store/reference_", None),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(LIMITS))
def test_a_size_limit_is_named_with_the_file_and_the_kept_cells(tmp_path, case):
    cmd, limit, names, kept = LIMITS[case]
    out, store = tmp_path / "out.nc", tmp_path / ("out.nc.cells" if cmd == "sweep" else "store")
    if cmd == "study":
        argv, body = [str(store)], _STUDY
    else:
        cfg = tmp_path / f"{cmd}.toml"
        cfg.write_text(SWEEP if cmd == "sweep" else SIM)
        argv, body = [cmd, str(cfg), "--out", str(out), "--no-progress"], _CLI
    run = subprocess.run([sys.executable, "-c", _LIMITED.format(limit=limit, body=body), *argv],
                         capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert run.returncode == 1, run.stderr
    line = run.stderr.strip().splitlines()[-1]
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr, run.stderr
    assert f"could not write '{tmp_path}/{names}" in line
    assert "exceed the file-size limit" in line and "nothing was left under that name" in line
    if kept is not None:
        assert f"{kept} finished cell file(s) are kept in {store}: rerun the same command to resume." in line
    assert not out.exists() and not list(tmp_path.rglob("*.part*"))
    if store.exists():
        assert metrics.verify(store).ok


# ---------------------------------------------------------------------------------------------------------------
# concurrency: two writers on one store, a reader during a rewrite (slow)

@pytest.mark.slow
def test_two_processes_on_one_store_both_give_the_uninterrupted_result(tmp_path, uninterrupted):
    store = tmp_path / "store"
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(store), str(tmp_path / f"out{i}.nc"), "netcdf"],
                              cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    for i in range(2):
        xr.testing.assert_identical(_data(open_whole(tmp_path / f"out{i}.nc")), uninterrupted("script", "netcdf"))
    assert metrics.verify(store).ok and len(list(store.glob("cell_*.nc"))) == 6
    assert not list(store.glob("*.part*"))


@pytest.mark.slow
def test_a_reader_during_a_rewrite_sees_the_old_or_the_new_output_whole(tmp_path):
    """``--force`` rewrites of a netCDF output, back and forth between two configs, while this process reads
    it again and again: every read is a whole output that verifies, of one config or the other."""
    a, b = _two_configs(tmp_path)
    out = tmp_path / "out.nc"
    assert _cli("simulate", a, "--out", out) == 0
    script = ("import sys\nfrom headflow import cli\nfor cfg in sys.argv[1:]:\n"
              f"    assert cli.main(['simulate', cfg, '--out', {str(out)!r}, '--force', '--no-progress']) == 0")
    writer = subprocess.Popen([sys.executable, "-c", script, *map(str, [b, a] * 4)], cwd=ROOT, env=ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = set()
    while writer.poll() is None:
        assert metrics.verify(out).ok  # never a partial file under the name
        seen.add(open_whole(out).sizes["particle"])
    _, err = writer.communicate()
    assert writer.returncode == 0, err
    assert seen <= {5, 6} and len(seen) == 2 and metrics.verify(out).ok
