"""Every stored byte verified (issue 56): damaged outputs, cells and references are detected on the next
read or resume and rebuilt from what verifies (the damaged bytes kept as ``<name>.unreadable``); every
write is atomic and never goes through a link; only part files the store's index records are removed;
a stored cell whose model is not what ``model_fn`` builds today is recomputed."""

import os
import pathlib
import subprocess
import sys
import warnings

import netCDF4
import numpy as np
import pytest
import xarray as xr

import metrics
from headflow import cli
from metrics import CellWarning, DamagedFileWarning, mean_field_limit_study, run_sweep
from metrics._runs.integrity import INDEX_NAME, StoreIndex, dataset_sha256
from metrics.io import open_whole
from particles import MultiHead
from particles.validation import InvalidParameterError
from tests.test_cli import SWEEP

KW = dict(n_seeds=2, t1=0.2, dt=0.1, n_saves=2, metrics=("energy_multi",), progress=False)
GRID = {"n_particles": [4, 5]}


def _flip_in(path: pathlib.Path, values: np.ndarray) -> None:
    """Flip one bit of the stored bytes of ``values`` (an uncompressed variable) inside ``path``."""
    data = bytearray(path.read_bytes())
    at = data.find(np.ascontiguousarray(values).tobytes()[:16])
    assert at >= 0
    data[at + 3] ^= 0x10
    path.write_bytes(bytes(data))


def _sweep_cli(tmp_path, out, *extra):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SWEEP)
    return cli.main(["sweep", str(cfg), "--out", str(out), "--no-progress", *extra])


def _said(capsys, tmp_path, out, *extra):
    """A rerun's stdout and stderr (the command line prints its warnings on one line each)."""
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("always", DamagedFileWarning)
        assert _sweep_cli(tmp_path, out, *extra) == 0
    return capsys.readouterr()


def test_flipped_value_in_a_netcdf_output_is_detected_and_rebuilt_from_the_cells(tmp_path, capsys):
    out = tmp_path / "s.nc"
    assert _sweep_cli(tmp_path, out) == 0
    good = xr.load_dataset(out)
    _flip_in(out, good.energy_multi.values)
    assert metrics.verify(out).damaged  # the Fletcher-32 checksum fails the read
    capsys.readouterr()
    said = _said(capsys, tmp_path, out)
    assert f"DamagedFileWarning: '{out}' has this config but cannot be read" in said.err
    assert "kept as 's.nc.unreadable'" in said.err
    assert "up to date" not in said.out and "0 computed" in said.out  # rebuilt from the store's verified cells
    assert (tmp_path / "s.nc.unreadable").exists()
    xr.testing.assert_identical(xr.load_dataset(out), good)
    assert metrics.verify(out).ok
    assert _sweep_cli(tmp_path, out) == 0 and "up to date" in capsys.readouterr().out


@pytest.mark.parametrize("damage", ["flip", "delete"])
def test_damaged_or_missing_zarr_chunk_is_detected_and_rebuilt(tmp_path, capsys, damage):
    out = tmp_path / "s.zarr"
    assert _sweep_cli(tmp_path, out, "--format", "zarr") == 0
    good = open_whole(out)
    chunk = next(p for p in sorted((out / "energy_multi").rglob("*")) if p.is_file() and p.name != "zarr.json")
    if damage == "flip":  # the CRC32C codec fails the read
        data = bytearray(chunk.read_bytes())
        data[len(data) // 2] ^= 0x01
        chunk.write_bytes(bytes(data))
    else:  # read back as the fill value: only the output's digest sees it
        chunk.unlink()
    report = metrics.verify(out)
    assert not report.ok and "s.zarr" in str(report)
    why = "cannot be read" if damage == "flip" else "fails its headflow_sha256 checksum"
    said = _said(capsys, tmp_path, out, "--format", "zarr")
    assert f"s.zarr' has this config but {why}" in said.err
    assert "up to date" not in said.out and (tmp_path / "s.zarr.unreadable").is_dir()
    xr.testing.assert_identical(open_whole(out), good)


def test_cell_whose_model_attr_was_edited_is_recomputed(tmp_path):
    good = run_sweep(GRID, store=tmp_path, **KW)
    cell = sorted(tmp_path.glob("cell_*.nc"))[0]
    with netCDF4.Dataset(cell, "a") as nc:  # another tool's edit: beta 1.0 -> 91.0, the values untouched
        nc.setncattr("model", nc.getncattr("model").replace('"beta": 1.0', '"beta": 91.0'))
    assert metrics.verify(tmp_path).damaged.keys() == {cell.name}
    with pytest.warns(CellWarning, match=f"{cell.name}.*checksum recorded in the store's index") as record:
        again = run_sweep(GRID, store=tmp_path, **KW)
    assert len([w for w in record if w.category is CellWarning]) == 1
    xr.testing.assert_identical(again.drop_attrs(), good.drop_attrs())
    assert (tmp_path / f"{cell.name}.unreadable").exists() and metrics.verify(tmp_path).ok


_SCALE = {"lambda": 1.0}


def _model_fn(params, rng):
    return MultiHead.scalar([_SCALE["lambda"]], d=int(params["d"]), beta=float(params["beta"]), kind=params["kind"])


def test_cells_of_a_changed_model_fn_are_recomputed(tmp_path, monkeypatch):
    first = run_sweep(GRID, store=tmp_path, model_fn=_model_fn, **KW)
    monkeypatch.setitem(_SCALE, "lambda", 0.5)  # the same module and qualname, another model
    with pytest.warns(CellWarning, match="holds a model other than the one model_fn builds") as record:
        again = run_sweep(GRID, store=tmp_path, model_fn=_model_fn, **KW)
    assert len([w for w in record if w.category is CellWarning]) == 4
    fresh = run_sweep(GRID, model_fn=_model_fn, **KW)
    np.testing.assert_array_equal(again.energy_multi.values, fresh.energy_multi.values)
    assert not np.array_equal(again.energy_multi.values, first.energy_multi.values)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CellWarning)
        run_sweep(GRID, store=tmp_path, model_fn=_model_fn, **KW)  # the new cells verify


STUDY_KW = dict(n_values=(8, 16), n_seeds=1, t1=0.1, n_saves=2, m_grid=64, dt=0.1, n_boot=20, reference="fv_circle")


def _density(x):
    return 1 + 0.5 * x[:, 0]


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_damaged_cached_reference_is_recomputed_and_its_bytes_kept(tmp_path, damage):
    model = MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax")
    first = mean_field_limit_study(model, _density, store=tmp_path, **STUDY_KW)
    (ref,) = tmp_path.glob("reference_*.nc")
    with xr.open_dataset(ref) as ds:
        values = ds[next(iter(ds.data_vars))].values
    if damage == "flip":
        _flip_in(ref, values)
    else:
        ref.write_bytes(ref.read_bytes()[: ref.stat().st_size // 2])
    damaged = ref.read_bytes()
    assert ref.name in metrics.verify(tmp_path).damaged
    with pytest.warns(CellWarning, match=f"cached reference {ref.name}.*kept as {ref.name}.unreadable"):
        again = mean_field_limit_study(model, _density, store=tmp_path, **STUDY_KW)
    assert again.attrs["reference_cached"] == 0
    assert (tmp_path / f"{ref.name}.unreadable").read_bytes() == damaged
    np.testing.assert_array_equal(again.w1.values, first.w1.values)
    assert metrics.verify(tmp_path).ok


def test_user_file_named_like_a_stale_part_survives(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    mine = tmp_path / f"cell_0123456789abcdef.nc.part{int(dead.stdout)}"
    mine.write_bytes(b"the user's own file")
    recorded = tmp_path / f"cell_fedcba9876543210.nc.part{int(dead.stdout)}"
    recorded.write_bytes(b"half a cell")
    StoreIndex(tmp_path).record("cell_fedcba9876543210.nc", "", recorded.name)  # a killed writer's part
    run_sweep(GRID, store=tmp_path, **KW)
    assert mine.read_bytes() == b"the user's own file" and not recorded.exists()


def test_animate_refuses_a_symlink_and_writes_atomically(tmp_path, monkeypatch):
    model = MultiHead.scalar([1.0], d=3, beta=2.0, kind="softmax")
    import particles

    x0 = particles.sample_uniform(6, d=3, rng=np.random.default_rng(0))
    traj = particles.simulate(x0, model, t1=0.2, dt=0.1, save=particles.SaveAt(ts=np.linspace(0, 0.2, 3)))
    ds = metrics.trajectory_to_dataset(traj, model)
    other = metrics.animate(ds, tmp_path / "other.gif", dpi=20)
    before = other.read_bytes()
    link = tmp_path / "link.gif"
    link.symlink_to(other)
    with pytest.raises(InvalidParameterError, match="symbolic link.*never writes through a link"):
        metrics.animate(ds, link, dpi=20)
    assert other.read_bytes() == before

    from PIL import Image

    def full_disk(self, fp, *args, **kwargs):  # a full disk after the first bytes
        pathlib.Path(fp).write_bytes(b"GIF89a" + bytes(100))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Image.Image, "save", full_disk)
    with pytest.raises(OSError, match="No space"):
        metrics.animate(ds, other, dpi=20)
    assert other.read_bytes() == before  # the previous animation, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.gif", "other.gif"]


def test_cli_refuses_a_symlinked_out_with_the_library_rule(tmp_path, capsys):
    target = tmp_path / "target.nc"
    target.write_text("another file\n")
    link = tmp_path / "s.nc"
    link.symlink_to(target)
    assert _sweep_cli(tmp_path, link) == 2
    assert "never writes through a link" in capsys.readouterr().err
    assert target.read_text() == "another file\n"


def test_verify_on_the_command_line(tmp_path, capsys):
    run_sweep(GRID, store=tmp_path, **KW)
    assert cli.main(["verify", str(tmp_path)]) == 0 and "0 damaged" in capsys.readouterr().out
    cell = sorted(tmp_path.glob("cell_*.nc"))[1]
    cell.write_bytes(cell.read_bytes()[:300])
    assert cli.main(["verify", str(tmp_path)]) == 1
    assert f"DAMAGED {cell.name}: cannot be read" in capsys.readouterr().out
    assert cli.main(["verify", str(tmp_path / "nowhere")]) == 2


def test_index_survives_a_torn_line_and_digests_survive_the_round_trip(tmp_path):
    run_sweep(GRID, store=tmp_path, **KW)
    with open(tmp_path / INDEX_NAME, "a") as fh:
        fh.write('{"name": "cell_')  # a torn append
    assert metrics.verify(tmp_path).damaged.keys() == {INDEX_NAME}
    with warnings.catch_warnings():
        warnings.simplefilter("error", CellWarning)
        run_sweep(GRID, store=tmp_path, **KW)  # the cells still verify; the resume compacts the index
    assert metrics.verify(tmp_path).ok
    ds = xr.Dataset({"a": ("x", np.arange(3.0)), "s": ((), 2), "k": ("x", np.array(["a", "bb", "c"], dtype=object))},
                    attrs={"n": 3, "v": [1.5], "t": "text"})
    for fmt, path in (("netcdf", tmp_path / "d.nc"), ("zarr", tmp_path / "d.zarr")):
        ds.to_netcdf(path) if fmt == "netcdf" else ds.to_zarr(path, consolidated=False)
        assert dataset_sha256(open_whole(path)) == dataset_sha256(ds)
    assert os.path.exists(tmp_path / "d.zarr")


_LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
from headflow import cli
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("limit, what", [(40_000, "output"), (10_000, "cell")])
def test_a_size_limit_is_named_and_finished_cells_are_kept(tmp_path, limit, what):
    """Cells of this sweep take about 21 kB and its output 63 kB: a 40 kB limit stops the output's write, a
    10 kB limit the first cell's; either way one message names the file, and a rerun resumes."""
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SWEEP)
    out, store = tmp_path / "s.nc", tmp_path / "s.nc.cells"
    argv = ["sweep", str(cfg), "--out", str(out), "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-c", _LIMITED.format(limit=limit), *argv], capture_output=True,
                         text=True, env=env, cwd=pathlib.Path(__file__).parents[2], timeout=300)
    assert run.returncode == 1, run.stderr
    name = str(out) if what == "output" else str(store / "cell_")
    assert f"headflow sweep: could not write '{name}" in run.stderr
    assert "exceed the file-size limit" in run.stderr and "Traceback" not in run.stderr
    n_kept = 8 if what == "output" else 0
    assert f"{n_kept} finished cell file(s) are kept in {store}: rerun the same command to resume." in run.stderr
    assert not out.exists() and not list(tmp_path.rglob("*.part*"))
    assert len(list(store.glob("cell_*.nc"))) == n_kept and metrics.verify(store).ok


def test_compacting_the_index_keeps_recorded_digests_and_live_parts(tmp_path):
    index = StoreIndex(tmp_path)
    (tmp_path / "cell_a.nc").write_bytes(b"a")
    live = tmp_path / f"cell_a.nc.part{os.getpid()}"
    live.write_bytes(b"being rewritten")
    index.record("cell_a.nc", "d" * 64, "cell_a.nc.part1")
    index.record("cell_a.nc", "", live.name)  # a rewrite claimed by a live writer
    index.record("cell_gone.nc", "e" * 64, "cell_gone.nc.part1")
    assert index.compact(lambda pid: pid == os.getpid()) == []
    assert index.digests() == {"cell_a.nc": "d" * 64} and live.exists()
    assert len((tmp_path / INDEX_NAME).read_text().splitlines()) == 2


def test_a_run_larger_than_the_free_disk_is_refused_before_it_starts(tmp_path, capsys, monkeypatch):
    from headflow import _budget

    monkeypatch.setattr(_budget, "free_space", lambda path: 1000)
    out = tmp_path / "s.nc"
    assert _sweep_cli(tmp_path, out) == 2
    err = capsys.readouterr().err
    assert f"--out '{out}': the run writes at least" in err and "1 kB free" in err and "Nothing was run" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.toml"]
    monkeypatch.setattr(_budget, "free_space", lambda path: 10**9)
    assert _sweep_cli(tmp_path, out) == 0
