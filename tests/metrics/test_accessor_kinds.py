"""ds.attn on trajectory, sweep and study Datasets; time by value; registration by `import metrics`."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import metrics
from particles import MultiHead, SaveAt, sample_uniform, simulate
from particles.validation import InvalidParameterError

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def trajectory():
    model = MultiHead.scalar([1.0, 0.5], d=3, beta=2.0)
    traj = simulate(sample_uniform(10, d=3, rng=np.random.default_rng(0)), model, t1=1.0, dt=0.05,
                    save=SaveAt(ts=np.linspace(0, 1, 5)))
    return metrics.trajectory_to_dataset(traj, model)


def test_time_selection_by_value(trajectory):
    ds = trajectory
    assert ds.attn.wasserstein_between(0.0, 1.0) == pytest.approx(
        metrics.wasserstein(ds.positions.values[0], ds.positions.values[-1]), rel=1e-12)
    assert ds.attn.wasserstein_between(0.25, 0.25) == pytest.approx(0.0, abs=1e-12)
    # W2 is a metric: the triangle inequality through a middle save
    w = ds.attn.wasserstein_between
    assert w(0.0, 1.0) <= w(0.0, 0.5) + w(0.5, 1.0) + 1e-12
    for bad, match in [(-1, "outside the saved times"), (99.0, "outside the saved times"),
                       (0.3, "not a saved time"), (float("nan"), "finite number"), ("last", "finite number")]:
        with pytest.raises(InvalidParameterError, match=match):
            ds.attn.wasserstein_between(0, bad)
    assert float(ds.attn.at(0.75).time) == 0.75


def test_accessor_on_a_sweep():
    ds = metrics.run_sweep({"n_particles": [4, 6]}, n_seeds=2, t1=0.1, dt=0.05, n_saves=2,
                           metrics=("n_clusters", "energy_multi"))
    assert ds.attn.kind == "sweep"
    assert ds.attn.n_clusters().identical(ds["n_clusters"])
    with pytest.raises(InvalidParameterError, match=r"not evaluated in this sweep .*'distance_to_uniform'"):
        ds.attn.distance_to_uniform()
    with pytest.raises(InvalidParameterError, match="sweep Dataset .* keeps metrics, not positions"):
        ds.attn.wasserstein_between(0.0, 0.1)
    # (it said: the attrs lack 'matrix_shape': pass the attrs written by MultiHead.to_attrs)
    with pytest.raises(InvalidParameterError, match="this sweep Dataset records none: a sweep runs one model per"):
        ds.attn.model


def test_accessor_on_a_study():
    model = MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax")
    ds = metrics.mean_field_limit_study(model, lambda x: 1 + 0.5 * x[:, 0], n_values=(8, 32), n_seeds=3, t1=0.1,
                                        n_saves=2, m_grid=64, dt=0.05)
    assert ds.attn.kind == "study"
    frame = ds.attn.rate_table(0.1)
    assert frame.attrs["time"] == 0.1 and list(frame.index) == [8, 32, "rate"]
    assert frame.loc["rate", ("w1", "value")] == float(ds.rate_w1.isel(time=1))
    np.testing.assert_allclose(frame[("w1", "value")].iloc[:-1], ds.w1.isel(time=1).mean("seed"), rtol=1e-15)
    ci = frame.loc["rate", [("w1", "ci_low"), ("w1", "ci_high")]].to_numpy(float)
    np.testing.assert_array_equal(ci, ds.rate_w1_ci.isel(time=1))
    # each row n carries the 95% t interval of its seed mean: no NaN left unexplained
    from scipy import stats

    g = ds.w1.isel(time=1).values
    want = stats.t.interval(0.95, g.shape[1] - 1, loc=g.mean(axis=1), scale=stats.sem(g, axis=1))
    rows = frame.iloc[:-1]
    np.testing.assert_allclose(rows[("w1", "ci_low")], want[0], rtol=1e-12)
    np.testing.assert_allclose(rows[("w1", "ci_high")], want[1], rtol=1e-12)
    assert not frame.isna().to_numpy().any()
    table = metrics.limit_study_table(ds, time=0.1)  # the same numbers as text
    assert table.startswith("t = 0.1") and f"{float(ds.rate_w1.isel(time=1)):.3f}" in table
    with pytest.raises(InvalidParameterError, match="outside the saved times"):
        ds.attn.rate_table(5.0)
    with pytest.raises(InvalidParameterError, match="limit-study Dataset"):
        ds.attn.wasserstein_between(0.0, 0.1)
    import matplotlib

    matplotlib.use("Agg")
    ax = ds.attn.plot_limit_study()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum("slope" in lab for lab in labels) == 2 and any("n^{-1/2}" in lab for lab in labels)
    title = ax.get_title().replace("\n", " ")
    assert "on $S^{1}$" in title and ax.get_ylabel().replace("\n", " ") == f"{ds.w1.attrs['long_name']} [rad]"
    assert "beta = 1.0" in title and "3 seeds" in title
    assert "noiseless (kappa = inf)" in title  # not a bare "kappa = inf"
    # the sizes studied are the ticks, as plain numbers (not 6 x 10^1 between the decades)
    np.testing.assert_array_equal(ax.get_xticks(), ds.n_particles.values)
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(n) for n in ds.n_particles.values]
    with pytest.raises(InvalidParameterError, match="rated gaps"):
        ds.attn.plot_limit_study("n_clusters")


def test_attn_comes_with_metrics_or_with_the_umbrella_and_nothing_else():
    # as cf_xarray: importing metrics registers the accessor; after `import headflow` a stand-in registered
    # through xarray's own mechanism (once xarray is imported; the one-shot hook then leaves sys.meta_path)
    # imports metrics on the first ds.attn; xarray alone registers nothing
    code = ("import sys, json, headflow; import xarray as xr; before = hasattr(xr.Dataset, 'attn'); "
            "hooks = [type(f).__name__ for f in sys.meta_path if 'headflow' in type(f).__module__]; "
            "light = 'metrics' not in sys.modules; ds = xr.Dataset({'a': ('time', [1.0])}, coords={'time': [0.0]}); "
            "print(json.dumps({'before': before, 'hooks': hooks, 'light': light, 'kind': ds.attn.kind, "
            "'real': type(ds.attn).__module__}))")
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"before": True, "hooks": ["_LayerAlias"], "light": True, "kind": "other",
                                      "real": "metrics._figures.accessor"}
    alone = subprocess.run([sys.executable, "-c", "import xarray as xr; print(hasattr(xr.Dataset, 'attn'))"],
                           capture_output=True, text=True, cwd=ROOT, check=True)
    assert alone.stdout.strip() == "False"
