"""Accuracy you can see: a run says which summation route each head took and the largest error bound
(trajectory, dataset, INFO log, command line); long runs show a bar by default; ``ds.attn`` is there
on any reopened Dataset after ``import headflow``."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import numpy as np
import pytest

import metrics
import particles
from headflow import cli
from particles._dynamics import progress

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def _fast_run():
    model = particles.MultiHead.scalar([1.0, 0.5], d=2, beta=1.0, kind="softmax", summation="fast")
    return model, particles.simulate(particles.sample_uniform(300, d=2, rng=0), model, t1=0.2, dt=0.1)


def test_trajectory_and_dataset_carry_route_and_bound(caplog):
    with caplog.at_level(logging.INFO, logger="headflow.summation"):
        model, traj = _fast_run()
    assert traj.summation["route"] == ["circle", "circle"] and 0 < traj.summation["bound_max"] < model.tol
    assert "simulate: summation route per head ['circle', 'circle'], largest error bound" in caplog.text
    ds = metrics.trajectory_to_dataset(traj, model)
    assert ds.attrs["summation_route"] == "circle, circle"
    assert ds.attrs["summation_bound_max"] == traj.summation["bound_max"]


def test_exact_runs_say_exact_and_other_fields_say_nothing():
    model = particles.MultiHead.scalar([1.0], d=3, beta=1.0, kind="relu")
    traj = particles.simulate(particles.sample_uniform(6, d=3, rng=0), model, t1=0.1, dt=0.05)
    assert traj.summation == {"route": ["exact"], "bound_max": 0.0}
    field = particles.simulate(np.eye(3), lambda t, x: np.zeros_like(x), t1=0.1, dt=0.05)
    assert field.summation == {}
    ens = particles.Ensemble(np.eye(3)[None], beta=np.array([0.5, 1.0]))
    x0 = np.stack([particles.sample_uniform(4, d=3, rng=s) for s in range(2)])
    assert particles.simulate(x0, ens, t1=0.1, dt=0.05).summation == {"route": ["exact"], "bound_max": 0.0}


def test_sweep_carries_the_routes_and_the_largest_bound_of_its_cells(tmp_path):
    def model_fn(params, rng):  # beta 0.5: fast sums, beta 1: exact ones
        return particles.MultiHead.scalar([1.0, 0.5], d=2, beta=float(params["beta"]), kind="softmax",
                                          summation="fast" if params["beta"] < 1 else "exact")

    kw = dict(n_seeds=1, t1=0.2, dt=0.1, n_saves=2, model_fn=model_fn, metrics=["energy_multi"],
              store=tmp_path / "cells")
    ds = metrics.run_sweep({"n_particles": [300], "d": [2], "n_heads": [2], "beta": [0.5, 1.0]}, **kw)
    assert ds.attrs["summation_route"] == "circle, circle; exact, exact"
    assert 0 < ds.attrs["summation_bound_max"] < 1e-10  # the fast cells' bound (tol = 1e-10); exact ones say 0
    again = metrics.run_sweep({"n_particles": [300], "d": [2], "n_heads": [2], "beta": [1.0]}, **kw)  # a reloaded cell
    assert again.attrs["summation_route"] == "exact, exact" and again.attrs["summation_bound_max"] == 0.0


def test_cli_prints_the_bound(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text('[model]\nkind = "softmax"\nd = 3\nbeta = 1.0\nlambdas = [1.0]\n'
                   "[run]\nn = 6\nt1 = 0.1\ndt = 0.05\nn_saves = 2\nseed = 1\n")
    assert cli.main(["simulate", str(cfg), "--out", str(tmp_path / "run.nc"), "--no-progress"]) == 0
    assert "summation: exact per head; largest relative error bound of a partition function 0" in \
        capsys.readouterr().out
    sweep = tmp_path / "sweep.toml"  # a sweep says it too, from the routes its cells recorded
    sweep.write_text('[sweep]\ngrid = { n_particles = [4], beta = [0.5, 2.0] }\nn_seeds = 1\nt1 = 0.1\ndt = 0.05\n'
                     'n_saves = 2\nmetrics = ["energy_multi"]\n')
    assert cli.main(["sweep", str(sweep), "--out", str(tmp_path / "sweep.nc"), "--no-progress"]) == 0
    assert "summation: exact per head; largest relative error bound of a partition function 0" in \
        capsys.readouterr().out


def test_progress_bar_opens_by_default_when_the_run_is_forecast_long(monkeypatch, capsys):
    model = particles.MultiHead.scalar([1.0], d=3, beta=1.0)
    x0 = particles.sample_uniform(8, d=3, rng=0)
    particles.simulate(x0, model, t1=0.2, dt=0.05)
    assert "simulate[rk4]" not in capsys.readouterr().err  # a short run: no bar
    monkeypatch.setattr(progress, "AUTO_SECONDS", 0.0)
    monkeypatch.setattr(progress, "_WAIT_SECONDS", 0.0)
    particles.simulate(x0, model, t1=0.2, dt=0.05)
    assert "simulate[rk4]" in capsys.readouterr().err
    particles.simulate(x0, model, t1=0.2, dt=0.05, progress=False)
    assert "simulate[rk4]" not in capsys.readouterr().err


@pytest.mark.parametrize("order", ["headflow first", "xarray first"])
def test_attn_on_a_reopened_dataset_after_import_headflow(tmp_path, order):
    path = tmp_path / "run.nc"
    model = particles.MultiHead.scalar([1.0], d=3, beta=1.0)
    traj = particles.simulate(particles.sample_uniform(5, d=3, rng=0), model, t1=0.2, dt=0.1)
    metrics.trajectory_to_dataset(traj, model).to_netcdf(path)
    imports = "import headflow, xarray as xr" if order == "headflow first" else "import xarray as xr, headflow"
    code = (f"import sys, json; {imports}; light = 'metrics' in sys.modules; "
            f"ds = xr.open_dataset({str(path)!r}); n = int(ds.attn.n_clusters().size); "
            "print(json.dumps({'light': light, 'n': n}))")
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    assert json.loads(out.stdout) == {"light": False, "n": 2}


def test_studies_carry_the_routes_and_the_largest_bound_of_their_cells():
    fast = particles.MultiHead.scalar([1.0, 0.5], d=2, beta=1.0, kind="softmax", summation="fast")
    limit = metrics.mean_field_limit_study(fast, lambda x: 1 + 0.5 * x[:, 1], n_values=(200, 300), n_seeds=1, t1=0.2,
                                           n_saves=2, m_grid=64, dt=0.1, progress=False)
    assert limit.attrs["summation_route"] == "circle, circle"
    assert 0 < limit.attrs["summation_bound_max"] < fast.tol
    exact = particles.MultiHead.scalar([1.0], d=2, beta=0.5, kind="softmax", summation="exact")
    chaos = metrics.chaos_horizon_study(exact, n_values=[64, 256], n_seeds=2, t1=8.0, n_saves=41, delta=(0.3,),
                                        l_max=3, dt=0.1, n_boot=20, progress=False)
    assert chaos.attrs["summation_route"] == "exact" and chaos.attrs["summation_bound_max"] == 0.0
    phase = metrics.phase_diagram([1.0, 2.0], n=4, d=2, t1=0.5, n_systems=2, n_saves=2, progress=False)
    assert phase.attrs["summation_route"] == "exact" and phase.attrs["summation_bound_max"] == 0.0  # settled too
