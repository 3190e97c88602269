"""Sweeps and studies too long to run are refused before any work: the library refuses a run of more steps
than a run may take (t1 / dt), the command line a sweep or a study estimated beyond its max_hours."""

import re

import numpy as np
import pytest

import metrics
import particles
from headflow import cli

STUDY = "[model]\nkind = \"usa\"\nd = 2\nbeta = 1.0\nlambdas = [1.0]\n[study]\nn_values = [16, 32]\n" \
        "n_saves = 2\nm_grid = 128\ndt = 0.05\n"
SWEEP = "[sweep]\ngrid = { n_particles = [8], beta = [1.0, 2.0] }\ndt = 0.1\nn_saves = 3\n"


def _run(tmp_path, capsys, command, text):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(text)
    status = cli.main([command, str(cfg), "--out", str(tmp_path / "out.nc"), "--no-progress"])
    return status, capsys.readouterr()


@pytest.mark.parametrize("command, text", [("study", STUDY + "t1 = 1e7\nn_seeds = 2\n"),
                                           ("sweep", SWEEP + "t1 = 1e7\nn_seeds = 1\n")])
def test_a_run_of_days_is_refused_naming_dt_and_t1(tmp_path, capsys, command, text):
    status, said = _run(tmp_path, capsys, command, text)
    assert status == 2 and "Traceback" not in said.err
    assert re.search(rf"\[{command}\] dt \(or t1\) makes this {command} too long: it would take about .* runs .* of "
                     rf"\d+ steps.*timed on this machine.*beyond \[{command}\] max_hours = 24\. Raise \[{command}\] dt "
                     rf"or lower \[{command}\] t1 \(fewer steps\), or raise \[{command}\] max_hours", said.err)
    assert not (tmp_path / "out.nc").exists() and not (tmp_path / "out.nc.cells").exists()


@pytest.mark.parametrize("command, text", [("study", STUDY + "t1 = 0.2\nn_seeds = [2, 9]\nmax_hours = 1e-9\n"),
                                           ("sweep", SWEEP + "t1 = 0.2\nn_seeds = 30\nmax_hours = 1e-9\n")])
def test_max_hours_refuses_what_the_estimate_puts_beyond_it(tmp_path, capsys, command, text):
    status, said = _run(tmp_path, capsys, command, text)
    assert status == 2
    key = r"\[sweep\] grid or n_seeds" if command == "sweep" else r"\[study\] n_seeds"
    assert re.search(rf"{key} makes this {command} too long.*beyond \[{command}\] max_hours = 1e-09\. Lower {key}",
                     said.err), said.err


@pytest.mark.parametrize("command", ["study", "sweep"])
def test_max_hours_is_checked_like_the_other_keys(tmp_path, capsys, command):
    status, said = _run(tmp_path, capsys, command, f"[{command}]\nmax_hours = 0\n")
    assert status == 2 and re.search(rf"\[{command}\]\.max_hours must be a real number in \(0, inf\)", said.err)


def test_the_estimate_counts_every_cell_at_its_own_n():
    from headflow._work import time_steps

    model = particles.MultiHead.scalar([1.0], d=2, beta=1.0, kind="usa", summation="exact")
    timed = time_steps(model, 256, "rk4", np.inf, 0.05, lambda x: None, print, "study")
    assert timed["power"] == 2 and timed["measured_at"] == [32, 256]
    # t = a + b n^2 through the two timings: larger n cost no less, and the fit passes through the timing at 256
    assert timed["at"](16)[0] <= timed["at"](256)[0] <= timed["at"](4096)[0]


def test_the_library_refuses_more_steps_than_a_run_may_take():
    with pytest.raises(particles.InvalidParameterError, match=r"'t1' parameter of run_sweep: t1 / dt is the number "
                       r"of steps of every run: it must be at most 10,000,000.*Raise dt or lower t1"):
        metrics.run_sweep({"n_particles": [8], "beta": [1.0, 2.0]}, t1=1e7, dt=0.1)
    model = particles.MultiHead.scalar([1.0], d=2, beta=1.0, kind="usa")
    rho = metrics.FamilyDensity("cosine", 2, amplitude=0.5, mode=2)
    with pytest.raises(particles.InvalidParameterError, match=r"'t1' parameter of mean_field_limit_study: t1 / dt"):
        metrics.mean_field_limit_study(model, rho, n_values=(16, 32), t1=1e7, dt=0.05)
    # an adaptive method's dt is only its first step: the count is not t1 / dt
    from metrics._runs.params import STEPS_WITHIN_METHOD

    assert STEPS_WITHIN_METHOD.test(1e9, 0.1, "dopri5") and not STEPS_WITHIN_METHOD.test(1e9, 0.1, "rk4")
