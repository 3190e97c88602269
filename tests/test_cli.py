"""The headflow command line: configs, outputs with provenance, resumable runs, info."""

import json
import pathlib
import subprocess
import sys

import pytest
import xarray as xr

from headflow import cli

SIM = """
[model]
kind = "usa"
d = 3
beta = 1.0
lambdas = [1.0, 0.5]
[run]
n = 6
t1 = 0.2
dt = 0.05
n_saves = 3
seed = 3
"""

SWEEP = """
[sweep]
grid = { n_particles = [4, 6], beta = [0.5, 2.0] }
n_seeds = 2
t1 = 0.2
dt = 0.1
n_saves = 2
metrics = ["n_clusters", "energy_multi"]
"""

STUDY = """
[model]
d = 2
beta = 1.0
lambdas = [1.0]
[study]
n_values = [4, 8]
n_seeds = 1
t1 = 0.1
n_saves = 2
m_grid = 64
dt = 0.05
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("command", ["simulate", "sweep", "study"])
def test_examples_are_the_defaults(command):
    example = cli.load_config(command, cli.EXAMPLES[command])
    default = cli.load_config(command, "")
    assert cli._public(example) == cli._public(default)


def test_simulate_writes_provenance_and_is_not_rerun(tmp_path, capsys):
    cfg = _write(tmp_path, "run.toml", SIM)
    out = tmp_path / "run.nc"
    assert cli.main(["simulate", cfg, "--out", str(out), "--no-progress"]) == 0
    with xr.open_dataset(out) as ds:
        recorded = json.loads(ds.attrs["config"])
        assert recorded["run"]["n"] == 6 and recorded["model"]["lambdas"] == [1.0, 0.5]
        assert recorded["run"]["method"] == "rk4" and "output" not in recorded  # defaults filled in
        assert json.loads(ds.attrs["seeds"])["seed"] == 3 and ds.attrs["Conventions"] == "CF-1.10"
        assert ds.positions.shape == (3, 6, 3) and ds.attrs["kind"] == "usa"
    mtime = out.stat().st_mtime_ns
    assert cli.main(["simulate", cfg, "--out", str(out), "--no-progress"]) == 0
    assert "up to date" in capsys.readouterr().out and out.stat().st_mtime_ns == mtime
    other = _write(tmp_path, "other.toml", SIM.replace("n = 6", "n = 5"))
    assert cli.main(["simulate", other, "--out", str(out), "--no-progress"]) == 2
    assert "--force" in capsys.readouterr().err
    assert cli.main(["simulate", other, "--out", str(out), "--no-progress", "--force"]) == 0
    with xr.open_dataset(out) as ds:
        assert ds.sizes["particle"] == 5
    assert not list(tmp_path.glob("*.part*"))


def test_simulate_zarr(tmp_path):
    import zarr  # noqa: F401  (in the test extra: its absence fails, never skips)
    cfg = _write(tmp_path, "run.toml", SIM)
    out = tmp_path / "run.zarr"
    assert cli.main(["simulate", cfg, "--out", str(out), "--format", "zarr", "--no-progress"]) == 0
    with xr.open_zarr(out, consolidated=False) as ds:
        assert ds.positions.shape == (3, 6, 3) and json.loads(ds.attrs["config"])["run"]["seed"] == 3
    # the store carries consolidated metadata: xarray's default opening reads it without a warning (an error here)
    with xr.open_zarr(out) as ds:
        assert ds.positions.shape == (3, 6, 3)


def test_sweep_resumes_only_missing_cells(tmp_path, monkeypatch):
    import metrics._runs.sweep

    cfg = _write(tmp_path, "sweep.toml", SWEEP)
    out = tmp_path / "sweep.nc"
    calls = []
    real = metrics._runs.sweep.simulate
    monkeypatch.setattr(metrics._runs.sweep, "simulate", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert cli.main(["sweep", cfg, "--out", str(out), "--no-progress"]) == 0
    assert len(calls) == 8  # 2 x 2 grid x 2 seeds
    with xr.open_dataset(out) as ds:
        first = ds.load()
    cells = sorted((tmp_path / "sweep.nc.cells").glob("cell_*.nc"))
    assert len(cells) == 8
    cells[0].unlink()
    out.unlink()  # an interrupted run: no output, one cell missing
    calls.clear()
    assert cli.main(["sweep", cfg, "--out", str(out), "--no-progress"]) == 0
    assert len(calls) == 1
    with xr.open_dataset(out) as ds:
        xr.testing.assert_equal(ds.load(), first)
        assert json.loads(ds.attrs["config"])["sweep"]["grid"] == {"n_particles": [4, 6], "beta": [0.5, 2.0]}
        assert json.loads(ds.attrs["sweep_config"])["n_seeds"] == 2


def test_study(tmp_path):
    cfg = _write(tmp_path, "study.toml", STUDY)
    out = tmp_path / "study.nc"
    assert cli.main(["study", cfg, "--out", str(out), "--no-progress"]) == 0
    with xr.open_dataset(out) as ds:
        assert ds.w1.dims == ("n_particles", "seed", "time") and ds.sizes["n_particles"] == 2
        assert json.loads(ds.attrs["config"])["density"] == {"family": "cosine", "amplitude": 0.5, "mode": 2,
                                                             "concentration": None, "expression": None}


@pytest.mark.parametrize("text, match", [
    ("[run]\nnn = 3\n", r"unknown key\(s\) \['nn'\] in \[run\]; valid: .*'n'"),
    ("[runs]\nn = 3\n", r"unknown section\(s\) \['runs'\]"),
    ("[model]\nkind = 'foo'\n", "kind"),
    ("[run]\nn = [\n", "not valid TOML"),
    ("[run]\ndiagnostics = ['energy', 'nope']\n", "'nope' is not one of"),
    ("[run]\nkappa = 2.0\n", "euler_maruyama"),
    ("[run]\ndiagnostics = []\npositions = false\n",
     r"\[run\] diagnostics = \[\] with \[run\] positions = false saves nothing: name the diagnostics .*leave \[run\] "
     r"diagnostics out for all of them"),
])
def test_config_errors_name_the_fix(tmp_path, capsys, text, match):
    cfg = _write(tmp_path, "bad.toml", text)
    assert cli.main(["simulate", cfg, "--out", str(tmp_path / "x.nc"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("headflow simulate: error:")
    import re

    assert re.search(match, err), err


def test_no_diagnostics_saves_the_positions_alone(tmp_path, capsys):
    cfg = _write(tmp_path, "pos.toml", "[run]\nn = 12\nt1 = 0.4\ndt = 0.05\nn_saves = 3\ndiagnostics = []\n")
    out = tmp_path / "pos.nc"
    assert cli.main(["simulate", cfg, "--out", str(out), "--no-progress"]) == 0, capsys.readouterr().err
    with xr.open_dataset(out) as ds:
        assert list(ds.data_vars) == ["positions"] and ds.positions.shape == (3, 12, 3)


def test_missing_config_and_output(tmp_path, capsys):
    assert cli.main(["simulate"]) == 2
    assert "--example" in capsys.readouterr().err
    assert cli.main(["simulate", str(tmp_path / "none.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    cfg = _write(tmp_path, "run.toml", SIM)
    assert cli.main(["simulate", cfg]) == 2
    assert "no output path" in capsys.readouterr().err


def test_example_flag_prints_a_runnable_config(capsys):
    assert cli.main(["sweep", "--example"]) == 0
    text = capsys.readouterr().out
    assert cli.load_config("sweep", text)["output"]["path"] == "sweep.nc"


def test_info(capsys):
    assert cli.main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["versions"]["headflow"] == cli.info()["versions"]["headflow"]
    assert data["threads"]["cpu_count"] >= 1 and data["summation"]["exact"] is True
    try:
        from particles._summation.routes import _finufft

        _finufft()  # (its import, without numpy < 1.25's distutils warning)

        assert data["summation"]["finufft"] is True
    except ImportError:
        assert data["summation"]["finufft"] is False
    assert cli.main(["info"]) == 0
    assert "summation paths" in capsys.readouterr().out


def test_help_stays_import_light():
    # the CLI's config module names no library list of its own: those are read lazily, so --help loads no numpy
    code = "import sys, headflow.cli; headflow.cli._parser(); print(sorted({'numpy', 'particles'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=pathlib.Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]"
