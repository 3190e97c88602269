"""One time convention (issue 37): the physical time (``log_time_scale = 0``) is the default of
``particles.MultiHead`` and of the command line, so one model written in TOML and in Python is one
run, bit for bit; ``"auto"`` (the rescaled time t' = e^c t) is explicit in both, and every
dataset's ``time`` coordinate records which time it holds."""

import json

import numpy as np
import pytest
import xarray as xr

import metrics
import particles
from headflow import cli

MODEL = """
[model]
kind = "usa"
d = 3
beta = 3.0
lambdas = [1.0, 0.5]
{extra}
[run]
n = 12
t1 = 2.0
dt = 0.05
n_saves = 5
seed = 7
"""


def _cli_run(tmp_path, extra=""):
    cfg = tmp_path / "run.toml"
    cfg.write_text(MODEL.format(extra=extra))
    out = tmp_path / "run.nc"
    assert cli.main(["simulate", str(cfg), "--out", str(out), "--no-progress", "--force"]) == 0
    with xr.open_dataset(out) as ds:
        return ds.load()


def _python_run(**options):
    """The same run written in Python: the CLI draws x0 by its seed rule, particles.seed_streams."""
    model = particles.MultiHead.scalar([1.0, 0.5], d=3, beta=3.0, kind="usa", **options)
    x0 = particles.sample_uniform(12, d=3, rng=particles.seed_streams(7).x0)
    traj = particles.simulate(x0, model, t1=2.0, dt=0.05, method="rk4",
                              save=particles.SaveAt(ts=np.linspace(0.0, 2.0, 5)))
    return metrics.trajectory_to_dataset(traj, model), model


def test_toml_and_python_give_the_same_run_bit_for_bit(tmp_path):
    from_toml = _cli_run(tmp_path)
    from_python, model = _python_run()
    assert model.log_time_scale == 0.0 and json.loads(from_toml.attrs["config"])["model"]["log_time_scale"] == 0.0
    assert np.array_equal(from_toml.positions.values, from_python.positions.values)
    assert np.array_equal(from_toml.time.values, from_python.time.values)
    assert from_toml.time.attrs == from_python.time.attrs
    assert from_toml.time.attrs["long_name"] == "time" and from_toml.time.attrs["log_time_scale"] == 0.0


def test_rescaled_time_is_explicit_in_both_and_recorded(tmp_path):
    from_toml = _cli_run(tmp_path, 'log_time_scale = "auto"')
    from_python, model = _python_run(log_time_scale="auto")
    assert model.log_time_scale == 3.0  # c = beta max_h ||M_h||_op
    assert np.array_equal(from_toml.positions.values, from_python.positions.values)
    attrs = from_toml.time.attrs
    assert attrs["log_time_scale"] == 3.0 and attrs["long_name"] == "rescaled time t' = e^c t, c = 3"
    assert "t = e^-c t'" in attrs["comment"] and attrs["units"] == "1"
    # the rescaled run to t' = 2 is the physical run to t = 2 e^-3: not the default run
    physical, _ = _python_run()
    assert not np.allclose(physical.positions.values[-1], from_toml.positions.values[-1], atol=1e-3)


def test_rescaled_time_is_the_physical_time_times_e_to_the_c():
    """dx/dt' = e^-c v: the rescaled run at t' = e^c t is the physical run at t (to the solvers' error)."""
    c = 1.5
    x0 = particles.sample_uniform(10, d=3, rng=np.random.default_rng(0))
    ts = np.array([0.0, 0.2, 0.4])
    model = particles.MultiHead.scalar([1.0], d=3, beta=1.0, kind="usa")
    fast = particles.simulate(x0, model, t1=0.4, dt=1e-3, save=particles.SaveAt(ts=ts))
    slow = particles.simulate(x0, model.replace(log_time_scale=c), t1=0.4 * np.exp(c), dt=1e-3 * np.exp(c),
                              save=particles.SaveAt(ts=ts * np.exp(c)))
    np.testing.assert_allclose(slow.x, fast.x, atol=1e-11)
    ds = metrics.trajectory_to_dataset(slow, model.replace(log_time_scale=c))
    assert ds.time.attrs["log_time_scale"] == c


def _scaled_model(params, rng, log_time_scale):
    return particles.MultiHead.scalar([1.0], d=params["d"], beta=params["beta"], kind=params["kind"],
                                      log_time_scale=log_time_scale)


@pytest.mark.parametrize("log_time_scale", [0.0, "auto"])
def test_sweep_cells_record_their_time_scale(log_time_scale):
    import functools

    model_fn = functools.partial(_scaled_model, log_time_scale=log_time_scale)
    model_fn.__module__, model_fn.__qualname__ = __name__, f"scaled_model_{log_time_scale}"
    ds = metrics.run_sweep({"beta": [1.0, 2.0], "kind": ["usa"]}, n_seeds=1, t1=0.1, dt=0.05, n_saves=2,
                           metrics=("energy_multi",), model_fn=model_fn, progress=False)
    want = np.array([[[0.0]], [[0.0]]]) if log_time_scale == 0.0 else np.array([[[1.0]], [[2.0]]])  # c = beta
    np.testing.assert_array_equal(ds.log_time_scale.values, want)
    if log_time_scale == 0.0:
        assert ds.time.attrs["log_time_scale"] == 0.0 and ds.time.attrs["long_name"] == "time"
    else:
        assert ds.time.attrs["log_time_scale"] == "per cell" and "per cell" in ds.time.attrs["long_name"]
    for b, beta in enumerate([1.0, 2.0]):  # each cell's recorded model is the one that ran
        model = metrics.model_from_attrs(json.loads(ds.model.values[b, 0, 0]))
        assert model.beta == beta and model.log_time_scale == want[b, 0, 0]
