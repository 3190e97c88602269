"""What the command line says when a run goes wrong or resumes: a failed run's reason on the
terminal, an output named for another format refused, a fixed step longer than the run named by
its key, and a resumed sweep that says how many cells it reused and computed."""

import numpy as np
import pytest
import xarray as xr

from headflow import cli

SIM = """
[model]
kind = "usa"
d = 3
beta = {beta}
lambdas = [1.0, 0.4]
[run]
n = 16
t1 = {t1}
dt = {dt}
n_saves = 3
"""

SWEEP = """
[sweep]
grid = {{ n_particles = [4, 6], beta = [0.5, 2.0] }}
n_seeds = 1
t1 = {t1}
dt = 0.1
n_saves = 2
metrics = ["n_clusters"]
"""


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the diagnostics at t = 0 overflow float64 (a real inf)
@pytest.mark.filterwarnings("default::particles.StabilityWarning")  # (the command line prints it)
def test_a_failed_run_prints_its_reason(tmp_path, capsys):
    cfg = _write(tmp_path, "run.toml", SIM.format(beta=400.0, t1=1.0, dt=0.02))
    assert cli.main(["simulate", cfg, "--out", str(tmp_path / "run.nc"), "--no-progress"]) == 0
    captured = capsys.readouterr()
    # dt x e^400 is past any stability interval: said on one line, with the fix
    assert "headflow simulate: StabilityWarning: " in captured.err and "log_time_scale='auto'" in captured.err
    assert "(failed," in captured.out
    assert "the run failed: " in captured.err and '[model] log_time_scale = "auto"' in captured.err  # the TOML key
    with xr.open_dataset(tmp_path / "run.nc") as ds:
        assert ds.attrs["status"] == "failed"
        # at t = 0 the rate and the kinetic term are both past float64: their difference is nan, and said so
        assert np.isnan(ds.rate_residual).any() and ds.rate_residual.attrs["comment"].startswith("nan at 1 of 1 saves")
    assert "note: " in captured.err and "rate_residual" in captured.err.split("note: ")[1]


@pytest.mark.parametrize(("name", "fmt", "named"), [("run.zarr", None, "zarr"), ("run.nc", "zarr", "netcdf")])
def test_an_output_named_for_another_format_is_refused(tmp_path, capsys, name, fmt, named):
    cfg = _write(tmp_path, "run.toml", SIM.format(beta=1.0, t1=0.2, dt=0.05))
    args = ["simulate", cfg, "--out", str(tmp_path / name), "--no-progress"] + (["--format", fmt] if fmt else [])
    assert cli.main(args) == 2
    assert f"is named as {named} but the format is {fmt or 'netcdf'}" in capsys.readouterr().err
    assert not (tmp_path / name).exists()


def test_a_fixed_step_longer_than_the_run_names_the_keys(tmp_path, capsys):
    cfg = _write(tmp_path, "run.toml", SIM.format(beta=1.0, t1=0.1, dt=0.5))
    assert cli.main(["simulate", cfg, "--out", str(tmp_path / "run.nc"), "--no-progress"]) == 2
    assert "[run] dt = 0.5 is longer than [run] t1 = 0.1" in capsys.readouterr().err


def test_a_resumed_sweep_counts_the_cells_it_reused(tmp_path, capsys):
    out = str(tmp_path / "s.nc")
    first = _write(tmp_path, "a.toml", SWEEP.format(t1=0.2) + f'store = "{tmp_path / "cells"}"\n')
    assert cli.main(["sweep", first, "--out", out, "--no-progress"]) == 0
    assert "(4/4 cells reached t1; 0 reused, 4 computed)" in capsys.readouterr().out
    # another t1 in the same store: the 4 files there are not this config's cells
    other = _write(tmp_path, "b.toml", SWEEP.format(t1=0.3) + f'store = "{tmp_path / "cells"}"\n')
    assert cli.main(["sweep", other, "--out", out, "--no-progress", "--force"]) == 0
    text = capsys.readouterr().out
    assert "holds 4 finished cell file(s); those of this config are reused" in text
    assert "(4/4 cells reached t1; 0 reused, 4 computed)" in text
    (tmp_path / "s.nc").unlink()
    assert cli.main(["sweep", first, "--out", out, "--no-progress"]) == 0
    assert "(4/4 cells reached t1; 4 reused, 0 computed)" in capsys.readouterr().out
    with xr.open_dataset(out) as ds:
        assert np.all(ds.success.values == 1)


STUDY = """
[model]
kind = "usa"
d = 2
beta = 400.0
lambdas = [1.0]
[study]
n_values = [8, 16]
n_seeds = 2
t1 = 0.2
n_saves = 2
m_grid = 64
dt = 0.02
"""


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the reference's first velocity overflows float64
@pytest.mark.filterwarnings("default::particles.StabilityWarning")  # (the command line prints it)
def test_a_study_whose_reference_the_solver_refuses_exits_with_the_reason(tmp_path, capsys):
    """USA heads at beta = 400 in physical time: the finite-volume reference used to crawl for hours
    (CFL steps ~1e-176), then a traceback; now status 1 and the solver's reason with its fix."""
    cfg = _write(tmp_path, "study.toml", STUDY)
    assert cli.main(["study", cfg, "--out", str(tmp_path / "study.nc"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "headflow study: StabilityWarning: " in err  # (the particle runs' dt x e^400: past any interval)
    assert "headflow study: the run failed: step size underflow" in err and '[model] log_time_scale = "auto"' in err
    assert "Traceback" not in err and not (tmp_path / "study.nc").exists()


@pytest.mark.parametrize("command", ["simulate", "sweep", "study"])
@pytest.mark.parametrize("model, named", [
    ('M = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]\nlambdas = [1.0, 0.5]',
     "M and .model. lambdas both give the heads"),
    ('W = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]', "W needs M"),
    ('W = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]\nlambdas = [1.0]', "W needs M"),
])
def test_heads_given_twice_or_half_are_refused_by_every_command(command, model, named):
    """The heads come from M (with W) or from lambdas: simulate and study used M and dropped lambdas, or ignored a
    W without M, where sweep refused; every command now refuses both, naming the keys."""
    from headflow._config import ConfigError, load_config

    with pytest.raises(ConfigError, match=named):
        load_config(command, "[model]\n" + model + "\n")


def test_a_library_refusal_names_the_toml_key_to_a_cli_user(tmp_path, capsys):
    """A sweep's store that is a user's file: the refusal comes from run_sweep's declaration, and the command
    line says "[sweep] store" (the key the user wrote), not "The 'store' parameter of run_sweep"."""
    (tmp_path / "notes.txt").write_text("mine")
    cfg = tmp_path / "sw.toml"
    cfg.write_text(f'[sweep]\nstore = "{tmp_path / "notes.txt"}"\ngrid = {{ n_particles = [8] }}\nn_seeds = 1\n'
                   't1 = 0.2\ndt = 0.05\nn_saves = 2\nmetrics = ["n_clusters"]\n')
    assert cli.main(["sweep", str(cfg), "--out", str(tmp_path / "sw.nc"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "[sweep] store must be a folder" in err and "run_sweep" not in err
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_diagnostics_past_float64_are_named_with_their_finite_counterpart(tmp_path, capsys):
    """Softmax heads at beta = 1000: E_h ~ e^{beta} overflows float64 (inf, as diagnose documents); the run is
    fine, and the output and the terminal say which values are inf and that log_energy is finite."""
    text = "[model]\nkind = \"softmax\"\nbeta = 1000.0\n[run]\nn = 12\nt1 = 0.4\ndt = 0.05\nn_saves = 3\n"
    cfg = _write(tmp_path, "hot.toml", text)
    assert cli.main(["simulate", cfg, "--out", str(tmp_path / "hot.nc"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "headflow simulate: note: energy, energy_multi, head_energy_rate, energy_rate, rate_residual overflow " \
           "float64 at some saves" in err and "log_energy holds the finite log of each head's energy" in err
    with xr.open_dataset(tmp_path / "hot.nc") as ds:
        assert ds.attrs["status"] == "finished" and "rate_residual" in ds.attrs["overflow"]
        assert np.isinf(ds.rate_residual).all() and np.isfinite(ds.log_energy).all()
        assert ds.rate_residual.attrs["comment"].startswith("inf at 3 of 3 saves: the value is past the float64 range")
        assert "log_energy" in ds.energy_multi.attrs["comment"] and "comment" not in ds.kinetic.attrs
    cfg = _write(tmp_path, "mild.toml", text.replace("1000.0", "1.0"))
    assert cli.main(["simulate", cfg, "--out", str(tmp_path / "mild.nc"), "--no-progress"]) == 0
    assert "note:" not in capsys.readouterr().err
    with xr.open_dataset(tmp_path / "mild.nc") as ds:
        assert "overflow" not in ds.attrs and "comment" not in ds.energy_multi.attrs
