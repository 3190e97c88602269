"""No file of a user's is ever removed or changed by a headflow command.

Every subcommand, with and without ``--force``, in both formats, is pointed at things headflow
did not write (a folder of the user's files, a plain file, a netCDF file without headflow's
provenance, a zarr store holding a user's file); each is refused before any work with exit
status 2, and every byte under the test folder is compared before and after. Bad output paths
(under a regular file, in a read-only folder) are refused before the run starts.
"""

import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest
import xarray as xr

from headflow import _config, _output, cli
from tests.test_cli import SIM, STUDY, SWEEP

CONFIGS = {"simulate": SIM, "sweep": SWEEP, "study": STUDY}


def _snapshot(root: pathlib.Path) -> dict:
    """Every file under ``root`` (relative path -> SHA-256 of its bytes) and every folder."""
    snap = {}
    for dirpath, _dirs, files in os.walk(root):
        rel = pathlib.Path(dirpath).relative_to(root)
        snap[str(rel) + "/"] = "folder"
        for name in files:
            snap[str(rel / name)] = hashlib.sha256((pathlib.Path(dirpath) / name).read_bytes()).hexdigest()
    return snap


def _user_files(root: pathlib.Path) -> pathlib.Path:
    """A folder of the user's files: text, bytes, a subfolder and a file named like an output."""
    root.mkdir()
    (root / "keep.txt").write_text("important\n")
    (root / "data.bin").write_bytes(bytes(range(256)) * 7)
    (root / "sub").mkdir()
    (root / "sub" / "notes.md").write_text("# notes\n")
    (root / "out.nc").write_text("not a dataset, but named like one\n")
    return root


def _foreign_netcdf(path: pathlib.Path) -> pathlib.Path:
    xr.Dataset({"a": ("x", np.arange(3.0))}, attrs={"title": "someone else's"}).to_netcdf(path)
    return path


def _run(tmp_path, command, out, *extra):
    cfg = tmp_path / f"{command}.toml"
    cfg.write_text(CONFIGS[command])
    return cli.main([command, str(cfg), "--out", str(out), "--no-progress", *extra])


@pytest.mark.parametrize("fmt", ["netcdf", "zarr"])
@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
@pytest.mark.parametrize("command", ["simulate", "sweep", "study"])
def test_no_command_touches_a_users_files(tmp_path, capsys, command, force, fmt):
    user = _user_files(tmp_path / "mydata")
    _foreign_netcdf(user / "foreign.nc")
    zarr_like = user / "store.zarr"
    xr.Dataset({"a": ("x", np.arange(2.0))}, attrs={"headflow_version": "0", "config": "{}"}).to_zarr(
        zarr_like, consolidated=False)
    (zarr_like / "my_notes.txt").write_text("kept inside a store\n")
    before = _snapshot(user)
    extra = ("--format", fmt) + (("--force",) if force else ())
    targets = [user, user / "keep.txt", user / "foreign.nc", user / "sub", zarr_like]
    for target in targets:
        assert _run(tmp_path, command, target, *extra) == 2, target
        err = capsys.readouterr().err
        assert str(target) in err and "Traceback" not in err
    assert _snapshot(user) == before  # every byte and every folder as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mydata", f"{command}.toml"]  # no store was made


def test_the_reported_data_loss_is_refused(tmp_path, capsys):
    """``mkdir mydata; echo important > mydata/keep.txt; headflow simulate run.toml --out mydata --force``."""
    user = tmp_path / "mydata"
    user.mkdir()
    (user / "keep.txt").write_text("important\n")
    assert _run(tmp_path, "simulate", user) == 2
    assert _run(tmp_path, "simulate", user, "--force") == 2
    err = capsys.readouterr().err
    assert "is a folder" in err and "never replaces what it did not write" in err and "run.nc" in err
    assert (user / "keep.txt").read_text() == "important\n" and sorted(os.listdir(user)) == ["keep.txt"]


_LOOKALIKES = {
    "none": {"title": "someone else's"},
    "two_names": {"headflow_version": "0.9", "config": "{}"},  # the two attrs the old check read
    "wrong_stamp": {"headflow_version": "0.9", "config": "{}", "headflow_output": "0" * 64},
    "copied_stamp": {"headflow_version": "0.9", "config": "{}",
                     "headflow_output": _output.output_stamp("{}", "1.0")},  # a stamp of other attrs
}


@pytest.mark.parametrize("fmt", ["netcdf", "zarr"])
@pytest.mark.parametrize("attrs", sorted(_LOOKALIKES))
@pytest.mark.parametrize("command", ["simulate", "sweep", "study"])
def test_force_never_replaces_a_foreign_dataset_with_lookalike_attrs(tmp_path, capsys, command, attrs, fmt):
    """A netCDF file or a pure zarr store another tool wrote, whatever attrs it carries, stays."""
    target = tmp_path / ("theirs.zarr" if fmt == "zarr" else "theirs.nc")
    ds = xr.Dataset({"a": ("x", np.arange(3.0))}, attrs=_LOOKALIKES[attrs])
    ds.to_zarr(target, consolidated=False) if fmt == "zarr" else ds.to_netcdf(target)
    before = _snapshot(tmp_path)
    assert _run(tmp_path, command, target, "--format", fmt, "--force") == 2
    err = capsys.readouterr().err
    assert "not a " + fmt + " dataset written by a headflow command" in err and "Traceback" not in err
    after = _snapshot(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before
    assert set(after) - set(before) == {f"{command}.toml"}


@pytest.mark.parametrize("fmt", ["netcdf", "zarr"])
def test_force_replaces_headflows_own_output(tmp_path, capsys, fmt):
    out = tmp_path / ("run.zarr" if fmt == "zarr" else "run.nc")
    assert _run(tmp_path, "simulate", out, "--format", fmt) == 0
    opener = (lambda p: xr.open_zarr(p, consolidated=False)) if fmt == "zarr" else xr.open_dataset
    with opener(out) as ds:
        assert ds.sizes["particle"] == 6
    cfg = tmp_path / "other.toml"
    cfg.write_text(SIM.replace("n = 6", "n = 5"))
    argv = ["simulate", str(cfg), "--out", str(out), "--no-progress", "--format", fmt]
    assert cli.main(argv) == 2 and "--force" in capsys.readouterr().err
    assert cli.main([*argv, "--force"]) == 0
    with opener(out) as ds:
        assert ds.sizes["particle"] == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["simulate.toml", "other.toml", out.name])


def test_store_of_user_files_is_used_and_left_alone(tmp_path, capsys):
    """A store folder that already holds the user's files: the cells (and the store's index and its lock)
    go beside them."""
    store = _user_files(tmp_path / "cells")
    before = _snapshot(store)
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SWEEP + f'store = "{store}"\n')
    assert cli.main(["sweep", str(cfg), "--out", str(tmp_path / "s.nc"), "--no-progress", "--force"]) == 0
    after = _snapshot(store)
    assert {k: v for k, v in after.items() if k in before} == before
    index = {"headflow_index.jsonl", "headflow_index.lock"}
    assert all(pathlib.Path(k).name.startswith("cell_") or pathlib.Path(k).name in index
               for k in set(after) - set(before))


def test_out_under_a_regular_file_is_refused_before_work(tmp_path, capsys):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    for command in CONFIGS:
        assert _run(tmp_path, command, blocker / "deeper" / "out.nc") == 2
        err = capsys.readouterr().err
        assert "regular file" in err and str(blocker) in err
    assert blocker.read_text() == "x"
    assert not list(tmp_path.glob("*.cells"))  # no run started: no store was made


def _make_read_only(folder: pathlib.Path):
    """Read-only for this process: chmod for a user, the immutable attribute for root."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return lambda: folder.chmod(0o755)
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)]).returncode != 0:
        pytest.skip("root without a working chattr: no way to make a folder read-only here")
    return lambda: subprocess.run(["chattr", "-i", str(folder)], check=True)


@pytest.mark.parametrize("command", ["simulate", "sweep", "study"])
def test_read_only_folder_is_refused_before_the_run(tmp_path, capsys, command):
    folder = tmp_path / "ro"
    folder.mkdir()
    cfg = tmp_path / f"{command}.toml"
    cfg.write_text(CONFIGS[command])
    undo = _make_read_only(folder)
    try:
        with pytest.raises(OSError):  # the premise: nothing can be created here
            (folder / "probe").write_text("x")
        status = cli.main([command, str(cfg), "--out", str(folder / "out.nc"), "--no-progress"])
    finally:
        undo()
    assert status == 2
    err = capsys.readouterr().err
    assert "not writable" in err and "was not started" in err
    assert os.listdir(folder) == []


def test_output_that_appears_during_the_run_is_kept(tmp_path):
    """check_output cleared the path, then a user's file appeared there: the result goes to the
    part file and the user's file stays."""
    out = tmp_path / "run.nc"
    assert not _output.check_output(out, "netcdf", "{}", force=True)
    out.write_text("the user's, written while the run was going\n")
    ds = xr.Dataset({"a": ("x", np.arange(2.0))}, attrs={"headflow_version": "x", "config": "{}"})
    with pytest.raises(cli.ConfigError, match="appeared during the run") as info:
        _output.write_output(ds, out, "netcdf")
    assert out.read_text() == "the user's, written while the run was going\n"
    part = tmp_path / f"run.nc.part{os.getpid()}"
    assert str(part) in str(info.value)
    with xr.open_dataset(part) as saved:
        np.testing.assert_array_equal(saved["a"].values, [0.0, 1.0])


# ------------------------------------------------------------------ configs that used to give tracebacks


@pytest.mark.parametrize("text, match", [
    ('[model]\nd = 3\nM = [[1.0, 0.0, 0.0], [0.0, 1.0], [0.0, 0.0, 1.0]]\n',
     r"\[model\]\.M must be .*\. It is not a rectangular array: every row needs the same length"),
    # a non-finite or non-numeric entry of well-formed rows is named by its index, never blamed on row lengths
    ('[model]\nd = 3\nM = [[[nan, 0, 0], [0, 1, 0], [0, 0, 1]]]\n',
     r"\[model\]\.M must be .*\. Its entry \[0\]\[0\]\[0\] is nan, not a finite number\.$"),
    ('[model]\nd = 3\nM = [[1, 0, 0], [0, 1, 0], [0, 0, -inf]]\n',
     r"\[model\]\.M must be .*\. Its entry \[2\]\[2\] is -inf, not a finite number\.$"),
    ('[model]\nd = 2\nM = [[1, 0], [0, 1]]\nW = [[1, true], [0, 1]]\n',
     r"\[model\]\.W must be .*\. Its entry \[0\]\[1\] is True, a bool, not a number\.$"),
    ('[model]\nd = 3\nM = [[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]]\n',
     r"\[model\]\.M must be .*not a rectangular array"),
    ('[model]\nd = 3\nM = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]\n', r"\[model\]\.M must be .*It holds 2 x 3 matrices"),
    ("[run]\nn_saves = 1\n", r"\[run\]\.n_saves must be an integer in \[2, inf\); got 1"),
    # integers beyond int64: too large, said with the limit (not "must be an integer in [1, inf)" alone)
    ("[run]\nn = 99999999999999999999\n", r"\[run\]\.n must be an integer in \[1, inf\); got 99999999999999999999 "
     r"\(int\)\. It is too large: integers are limited to int64, at most 2\^63 - 1 = 9223372036854775807 in size\.$"),
    ("[run]\nt1 = 99999999999999999999\n", r"\[run\]\.t1 .* It is too large: .* write it as a float"),
    ('[run]\nt1 = "1"\n', r"\[run\]\.t1 must be a real number in \(0, inf\); got '1' \(str\)\. Write 1 without quotes"),
])
def test_bad_configs_name_the_key_without_a_traceback(tmp_path, capsys, text, match):
    cfg = tmp_path / "run.toml"
    cfg.write_text(text)
    assert cli.main(["simulate", str(cfg), "--out", str(tmp_path / "out.nc"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert re.search(match, err) and "Traceback" not in err
    assert not (tmp_path / "out.nc").exists()


def test_config_that_is_not_utf8_is_refused(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_bytes(b"[run]\nn = 4  # \xff\xfe latin-1 bytes\n")
    assert cli.main(["simulate", str(cfg), "--out", str(tmp_path / "out.nc")]) == 2
    err = capsys.readouterr().err
    assert "is not UTF-8 text" in err and "Traceback" not in err


def test_study_seeds_per_n_from_the_declaration(tmp_path):
    """[study] n_seeds takes what mean_field_limit_study's declaration takes: one count per n too."""
    cfg = _config.load_config("study", "[study]\nn_values = [4, 8]\nn_seeds = [3, 2]\n")
    assert cfg["study"]["n_seeds"] == [3, 2]
    with pytest.raises(cli.ConfigError, match=r"\[study\]\.n_seeds must be .*; got \[3, 0\]"):
        _config.load_config("study", "[study]\nn_values = [4, 8]\nn_seeds = [3, 0]\n")


def test_foreign_cell_files_in_a_store_are_named_not_counted(tmp_path, capsys):
    """A ``cell_*.nc`` headflow did not write (a user's file, a lookalike name) is neither counted as a
    finished cell nor touched; the message names it."""
    store = tmp_path / "cells"
    store.mkdir()
    _foreign_netcdf(store / "cell_0123456789abcdef.nc")  # a cell's name, not a cell
    (store / "cell_notes.nc").write_text("mine\n")
    before = _snapshot(store)
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SWEEP + f'store = "{store}"\n')
    assert cli.main(["sweep", str(cfg), "--out", str(tmp_path / "s.nc"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "resuming" not in out
    assert "ignoring 2 file(s)" in out and "cell_0123456789abcdef.nc" in out and "cell_notes.nc" in out
    assert {k: v for k, v in _snapshot(store).items() if k in before} == before
    (tmp_path / "s.nc").unlink()
    assert cli.main(["sweep", str(cfg), "--out", str(tmp_path / "s.nc"), "--no-progress"]) == 0
    assert "holds 8 finished cell file(s)" in capsys.readouterr().out  # 2 x 2 grid x 2 seeds, not 10


# ------------------------------------------------------------------ configs as shells pass them


def test_config_through_a_pipe_is_read(tmp_path, capsys):
    """``headflow simulate <(cat run.toml)``: the shell passes /dev/fd/N, which is no regular file."""
    read_end, write_end = os.pipe()
    os.write(write_end, SIM.encode())
    os.close(write_end)
    try:
        assert cli.main(["simulate", f"/dev/fd/{read_end}", "--out", str(tmp_path / "p.nc"), "--no-progress"]) == 0
    finally:
        os.close(read_end)
    with xr.open_dataset(tmp_path / "p.nc") as ds:
        assert ds.sizes["particle"] == 6


def test_process_substitution_in_a_real_shell(tmp_path):
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    (tmp_path / "run.toml").write_text(SIM)
    cmd = f'"{sys.executable}" -m headflow simulate <(cat run.toml) --out p.nc --no-progress'
    done = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "p.nc").is_file()


def test_config_with_a_byte_order_mark_is_read_with_a_note(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_bytes(b"\xef\xbb\xbf" + SIM.encode())
    assert cli.main(["simulate", str(cfg), "--out", str(tmp_path / "b.nc"), "--no-progress"]) == 0
    assert "byte-order mark" in capsys.readouterr().err
    with xr.open_dataset(tmp_path / "b.nc") as ds:
        assert ds.sizes["particle"] == 6


def test_config_that_is_a_folder_is_refused_as_a_folder(tmp_path, capsys):
    assert cli.main(["simulate", str(tmp_path), "--out", str(tmp_path / "o.nc")]) == 2
    err = capsys.readouterr().err
    assert "is a folder, not a file" in err and "does not exist" not in err and "Traceback" not in err


@pytest.mark.parametrize("command, text, key", [
    ("simulate", "[run]\nn = 10000000000", "[run] n"),
    ("simulate", "[run]\nn_saves = 10000000000", "[run] n_saves"),
    ("simulate", "[model]\nd = 1000000", "[model] d"),
    ("sweep", "[sweep]\nn_saves = 10000000000", "[sweep] n_saves"),
    ("sweep", "[sweep]\ngrid = { n_particles = [10000000000] }", "[sweep] grid.n_particles"),
    ("sweep", "[sweep]\ngrid = { d = [1000000] }", "[sweep] grid.d"),
    ("sweep", "[model]\nd = 1000000", "[model] d"),
    ("study", "[study]\nn_saves = 10000000000", "[study] n_saves"),
    ("study", "[study]\nn_values = [50000, 100000]", "[study] n_values"),  # (on a machine with 1 MB free)
    ("study", "[model]\nd = 1000000", "[model] d"),
    ("study", "[study]\nm_grid = 10000000000", "[study] m_grid"),
    ("study", "[model]\nd = 3\n[study]\nn_projections = 10000000000", "[study] n_projections"),
    ("study", "[model]\nd = 3\n[study]\nn_reference = 10000000000", "[study] n_reference"),
])
def test_config_too_large_for_memory_names_the_key_before_allocating(tmp_path, capsys, monkeypatch, command, text,
                                                                     key):
    if "50000" in text:
        monkeypatch.setattr("headflow._budget.available_memory", lambda: 10**6)
    cfg = tmp_path / "big.toml"
    cfg.write_text(text + "\n")
    assert cli.main([command, str(cfg), "--out", str(tmp_path / "o.nc"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{key} is too large" in err and "Nothing was allocated" in err and "Traceback" not in err
    assert not (tmp_path / "o.nc").exists()


def test_memory_estimate_counts_what_the_run_holds():
    from headflow._budget import STATE_COPIES, check_simulate_memory

    cfg = _config.load_config("simulate", "[run]\nn = 100\nn_saves = 1000\n[model]\nd = 5\nlambdas = [1.0, 2.0]\n")
    need = check_simulate_memory(cfg, available=10**12)
    assert need == 8 * (STATE_COPIES * 100 * 5 + 1000 * (100 * 5 + 16 * 2 + 16) + 2 * 2 * 25)
    with pytest.raises(cli.ConfigError, match=r"\[run\] n_saves is too large"):
        check_simulate_memory(cfg, available=need - 1)


def test_a_foreign_file_under_a_real_cells_name_is_reported_as_renamed(tmp_path, capsys):
    """A file headflow did not write, sitting under the name of a cell the run computes, is moved aside
    (bytes kept): what the run prints about it says so, and the file is where the message says."""
    store = tmp_path / "cells"
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SWEEP + f'store = "{store}"\n')
    assert cli.main(["sweep", str(cfg), "--out", str(tmp_path / "s.nc"), "--no-progress"]) == 0
    cell = sorted(store.glob("cell_*.nc"))[0]
    cell.unlink()
    _foreign_netcdf(cell)
    mine = hashlib.sha256(cell.read_bytes()).hexdigest()
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # the command prints each warning as a line of its own
        assert cli.main(["sweep", str(cfg), "--out", str(tmp_path / "t.nc"), "--no-progress"]) == 0
    said = capsys.readouterr()
    assert cell.name in said.out and "renamed to <name>.unreadable (its bytes kept)" in said.out
    assert re.search(rf"CellWarning: sweep cell {cell.name} .*no cell_key.*kept as {cell.name}\.unreadable", said.err)
    moved = cell.with_name(cell.name + ".unreadable")
    assert hashlib.sha256(moved.read_bytes()).hexdigest() == mine
    assert "cell_key" in xr.open_dataset(cell).attrs  # the cell was computed again under its own name


@pytest.mark.parametrize("command, text, key", [
    ("sweep", "[sweep]\nn_seeds = 1000000000", "[sweep] n_seeds"),
    ("sweep", "[sweep]\ngrid = { n_particles = [4, 6], beta = " + str([1.0 + i for i in range(60000)]) + " }",
     "[sweep] grid"),
    ("study", "[study]\nn_seeds = 1000000000", "[study] n_seeds"),
    ("study", "[study]\nn_seeds = 100\nn_values = " + str(list(range(2, 1202))), "[study] n_values"),
])
def test_more_cells_than_the_limit_are_refused_before_any_is_listed(tmp_path, capsys, command, text, key):
    """grid points x seeds (or n_values x seeds) beyond MAX_CELLS: refused naming the key, nothing run or written."""
    from headflow._budget import MAX_CELLS

    cfg = tmp_path / "big.toml"
    cfg.write_text(text + "\n")
    assert cli.main([command, str(cfg), "--out", str(tmp_path / "o.nc"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{key} is too large" in err and f"{MAX_CELLS:,} cells" in err and "Nothing was run" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.toml"]


@pytest.mark.parametrize("command", ["sweep", "study"])
def test_memory_of_the_cell_records_is_counted(monkeypatch, command):
    """Within the cell limit, the records of many cells still count against the memory available."""
    from headflow._budget import CELL_BYTES, check_study_memory, check_sweep_memory

    check = {"sweep": check_sweep_memory, "study": check_study_memory}[command]
    few = check(_config.load_config(command, f"[{command}]\nn_seeds = 1\n"), available=10**12)
    many = check(_config.load_config(command, f"[{command}]\nn_seeds = 20001\n"), available=10**12)
    assert many - few >= 20000 * CELL_BYTES  # every extra seed adds at least one cell of every grid point
    with pytest.raises(cli.ConfigError, match=rf"\[{command}\] n_seeds is too large"):
        check(_config.load_config(command, f"[{command}]\nn_seeds = 20001\n"), available=many - 1)


@pytest.mark.parametrize("command", ["simulate", "sweep"])
def test_a_zarr_output_with_a_user_file_inside_is_refused_naming_the_file(tmp_path, capsys, command):
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIGS[command])
    out = tmp_path / "o.zarr"
    argv = [command, str(cfg), "--out", str(out), "--format", "zarr", "--no-progress"]
    assert cli.main(argv) == 0
    (out / "notes.txt").write_text("mine")
    before = _snapshot(out)
    cfg.write_text(CONFIGS[command].replace("t1 = 0.2", "t1 = 0.3"))
    capsys.readouterr()
    assert cli.main(argv + ["--force"]) == 2
    err = capsys.readouterr().err
    assert "'notes.txt', a file headflow did not write" in err and "headflow_output" not in err
    assert _snapshot(out) == before


@pytest.mark.parametrize("command", ["sweep", "study"])
def test_a_store_equal_to_the_output_is_refused_before_the_run(tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIGS[command] + 'store = "out.nc"\n')  # relative: the same path as ./out.nc
    assert cli.main([command, str(cfg), "--out", "./out.nc", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"[{command}] store" in err and "--out" in err and "Nothing was run" in err and "appeared" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]


def test_a_netcdf_output_named_with_a_trailing_slash_is_refused(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text(SIM)
    assert cli.main(["simulate", str(cfg), "--out", str(tmp_path / "outdir") + "/", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "ends in a slash" in err and "outdir/run.nc" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.toml"]
