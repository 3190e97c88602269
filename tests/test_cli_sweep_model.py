"""``headflow sweep`` chooses its model (issue 37): a ``[model]`` section with the keys of
``headflow simulate``'s, grids over head strengths and kinds, the recorded model of every cell, and
the same cell from Python's ``metrics.run_sweep`` bit for bit."""

import json
import re

import numpy as np
import pytest
import xarray as xr

import metrics
import particles
from headflow import cli

SWEEP = """
[sweep]
grid = {{ lambdas = [[1.0], [1.0, 0.5]], kind = ["usa", "softmax"] }}
n_seeds = 2
t1 = 0.3
dt = 0.05
n_saves = 3
metrics = ["n_clusters", "energy_multi"]
[model]
{model}
"""
MODEL = 'beta = 1.5\nd = 2\nsummation = "exact"\nlog_time_scale = "auto"'


def _sweep(tmp_path, model=MODEL, name="sweep"):
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(SWEEP.format(model=model))
    out = tmp_path / f"{name}.nc"
    assert cli.main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 0
    with xr.open_dataset(out) as ds:
        return ds.load()


def _scalar_model(params, rng):
    return particles.MultiHead.scalar(params["lambdas"], d=params["d"], beta=params["beta"], kind=params["kind"],
                                      summation="exact", log_time_scale="auto")


def test_sweep_records_the_requested_models(tmp_path):
    ds = _sweep(tmp_path)
    assert list(ds.lambdas.values) == ["[1.0]", "[1.0, 0.5]"] and list(ds.kind.values) == ["usa", "softmax"]
    assert ds.attrs["fixed_beta"] == 1.5 and ds.attrs["fixed_d"] == 2 and "fixed_n_heads" not in ds.attrs
    assert ds.attrs["model_source"].startswith("metrics.SweepModel (scalar heads")
    for i, lambdas in enumerate([[1.0], [1.0, 0.5]]):
        for j, kind in enumerate(["usa", "softmax"]):
            for s in range(2):
                model = metrics.model_from_attrs(json.loads(str(ds.model.values[i, j, s])))
                np.testing.assert_array_equal(model.M, np.asarray(lambdas)[:, None, None] * np.eye(2))
                assert model.aligned and (model.kind, model.beta, model.d, model.summation) == (kind, 1.5, 2, "exact")
                # "auto": c = beta max_h |lambda_h| for USA heads, 0 for softmax
                assert model.log_time_scale == ds.log_time_scale.values[i, j, s] == (1.5 if kind == "usa" else 0.0)
    assert ds.time.attrs["log_time_scale"] == "per cell"


def test_the_same_cell_from_python_is_identical(tmp_path):
    from_toml = _sweep(tmp_path)
    for model_fn in (_scalar_model, metrics.SweepModel(summation="exact", log_time_scale="auto")):
        cell = metrics.run_sweep({"lambdas": [[1.0, 0.5]], "kind": ["usa"]}, fixed={"beta": 1.5, "d": 2}, n_seeds=2,
                                 t1=0.3, dt=0.05, n_saves=3, metrics=("n_clusters", "energy_multi"), model_fn=model_fn,
                                 progress=False)
        for name in ("energy_multi", "n_clusters", "kinetic", "rate_residual"):
            assert np.array_equal(cell[name].values[0, 0], from_toml[name].values[1, 0]), name
        assert np.array_equal(cell.model.values[0, 0], from_toml.model.values[1, 0])
    # and the kinds differ (the grid reached the model)
    assert not np.array_equal(from_toml.energy_multi.values[1, 0], from_toml.energy_multi.values[1, 1])


def test_without_a_model_the_default_heads_are_named(tmp_path):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text("[sweep]\ngrid = { beta = [1.0, 2.0] }\nn_seeds = 1\nt1 = 0.1\ndt = 0.05\nn_saves = 2\n")
    out = tmp_path / "sweep.nc"
    assert cli.main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 0
    with xr.open_dataset(out) as ds:
        assert ds.attrs["model_source"] == "metrics.default_model (random symmetric heads)"
        assert ds.attrs["model_fn"] == "metrics.sweep.default_model" and ds.attrs["fixed_kind"] == "softmax"
        model = metrics.model_from_attrs(json.loads(str(ds.model.values[1, 0])))
        assert model.beta == 2.0 and model.symmetric and not np.allclose(model.M[0], model.M[0, 0, 0] * np.eye(3))


def test_model_matrices_fix_d_and_heads(tmp_path):
    cfg = tmp_path / "m.toml"
    cfg.write_text('[sweep]\ngrid = { kind = ["usa", "softmax"] }\nn_seeds = 1\nt1 = 0.1\ndt = 0.05\nn_saves = 2\n'
                   '[model]\nM = [[[1.0, 0.2], [0.2, 0.5]], [[0.3, 0.0], [0.0, -0.4]]]\nbeta = 0.5\n')
    out = tmp_path / "m.nc"
    assert cli.main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 0
    with xr.open_dataset(out) as ds:
        assert ds.attrs["fixed_d"] == 2 and ds.attrs["fixed_n_heads"] == 2
        model = metrics.model_from_attrs(json.loads(str(ds.model.values[0, 0])))
        np.testing.assert_array_equal(model.M, [[[1.0, 0.2], [0.2, 0.5]], [[0.3, 0.0], [0.0, -0.4]]])


@pytest.mark.parametrize("text, match", [
    ('[sweep]\ngrid = { beta = [1.0, 2.0] }\n[model]\nbeta = 2.0\n',
     r"\[model\] beta = 2.0 and \[sweep\] grid.beta both give beta"),
    ('[sweep]\ngrid = { n_heads = [1, 2] }\n[model]\nlambdas = [1.0]\n',
     r"\[sweep\] grid.n_heads: the heads are given"),
    ('[sweep]\ngrid = { lambdas = [[1.0]] }\n[model]\nM = [[1.0, 0.0], [0.0, 1.0]]\n',
     r"\[model\] M and \[sweep\] grid.lambdas both give the heads"),
    ('[sweep]\ngrid = { lambdas = [1.0, 0.5] }\n', r"\[sweep\]\.grid\['lambdas'\] must be a list of lists"),
    ('[sweep]\ngrid = { beta = [1.0] }\n[model]\nkind = "foo"\n', r"\[model\]\.kind must be one of .*; got 'foo'"),
    ('[sweep]\ngrid = { beta = [1.0] }\n[model]\nlog_time_scale = "fast"\n',
     r"\[model\]\.log_time_scale must be .*; got 'fast'"),
    ('[sweep]\ngrid = { beta = [1.0] }\n[model]\nd = 3\nM = [[1.0, 0.0], [0.0, 1.0]]\n',
     r"\[model\] M is 2 x 2: it fixes d"),
    ('[sweep]\ngrid = { beta = [1.0] }\n[model]\nW = [[1.0, 0.0], [0.0, 1.0]]\n', r"\[model\] W needs M"),
    ('[sweep]\ngrid = { beta = [1.0] }\n[model]\nbogus = 1\n', r"unknown key\(s\) \['bogus'\] in \[model\]"),
    # an integer beyond int64 is said to be too large (it is "an integer in [2, inf)")
    ('[sweep]\ngrid = { n_particles = [8], d = [3, 99999999999999999999] }\n',
     r"\[sweep\]\.grid\['d'\] values must each be an integer in \[2, inf\); got 99999999999999999999 \(int\)\. It "
     r"is too large: integers are limited to int64, at most 2\^63 - 1 = 9223372036854775807 in size\.$"),
])
def test_bad_sweep_models_name_the_key(tmp_path, capsys, text, match):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    assert cli.main(["sweep", str(cfg), "--out", str(tmp_path / "x.nc"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("headflow sweep: error:") and "Traceback" not in err
    assert re.search(match, err), err
    assert not (tmp_path / "x.nc").exists()


def test_a_flat_sweep_refuses_the_metrics_of_the_sphere_and_keeps_its_options(tmp_path, capsys):
    """geometry, causal and update reach every cell; a metric of tokens on the sphere is refused off it."""
    base = "[sweep]\ngrid = { n_particles = [6] }\nt1 = 0.2\ndt = 0.1\nn_saves = 2\n"
    cfg = tmp_path / "flat.toml"
    cfg.write_text(base + "[model]\ngeometry = \"flat\"\n")
    assert cli.main(["sweep", str(cfg), "--out", str(tmp_path / "flat.nc"), "--no-progress"]) == 2
    assert re.search(r"\[sweep\] metrics: n_clusters measure tokens on the unit sphere, but the cells' heads run "
                     r"with geometry='flat'.*Leave them out of metrics \(the default list holds n_clusters: name",
                     capsys.readouterr().err)
    cfg.write_text(base + "metrics = [\"energy_multi\"]\n[model]\ngeometry = \"flat\"\nupdate = \"pre_ln\"\n"
                          "causal = true\n")
    assert cli.main(["sweep", str(cfg), "--out", str(tmp_path / "flat.nc"), "--no-progress"]) == 0
    with xr.open_dataset(tmp_path / "flat.nc") as ds:
        model = json.loads(ds.model.values.ravel()[0])
    assert (model["geometry"], model["update"], model["causal"]) == ("flat", "pre_ln", 1)
