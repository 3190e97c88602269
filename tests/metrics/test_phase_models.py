"""metrics.phase_diagram of any model: several heads, grids over any parameter, model functions, the one-head
form's numbers, resume, other kinds and masks, and the plot of a non-beta axis."""

import os

import numpy as np
import pytest
import xarray as xr

import metrics
from metrics import clustered_pair_fraction, n_clusters_batch, phase_diagram
from particles import InvalidParameterError, MultiHead, simulate, theory

LAMBDAS = [0.5, 1.0, 2.0]
SMALL = dict(n=6, t1=3.0, n_systems=6, chunk=4, n_saves=4, dt=0.1, progress=False)


def _heads(d=16, beta=1.0, kind="softmax"):
    return MultiHead.scalar(LAMBDAS, d=d, beta=beta, kind=kind)


def _step_at_theory(ds, point: dict, n: int):
    """Equiangular tokens stay equiangular (docs/theory.md §4): the clustered fraction is 1{t > t*} away from t*."""
    t, tstar = ds.time.values, float(ds.theory_time.sel(point))
    far = np.abs(t - tstar) > 0.05 * tstar
    np.testing.assert_array_equal(ds.clustered_pairs.sel(point).values[far], (t[far] > tstar).astype(float))
    np.testing.assert_array_equal(ds.n_clusters.sel(point).values[far], np.where(t[far] > tstar, 1.0, n))


def test_three_heads_on_s15_over_beta():
    betas = [0.0, 1.0, 3.0]
    ds = phase_diagram(_heads(), {"beta": betas}, **{**SMALL, "t1": 4.0, "n_saves": 41}, init="equiangular")
    assert ds.clustered_pairs.dims == ("beta", "time") and ds.success.dims == ("beta", "chunk")
    assert np.all(ds.success == 1) and ds.attrs["grid_axes"] == "beta"
    for b in betas:  # the law of the three heads, each at its own beta lambda_h (not the one of Lambda = 3.5)
        assert float(ds.theory_time.sel(beta=b)) == pytest.approx(
            theory.hitting_time(0.0, 0.999, lambdas=LAMBDAS, beta=b, n=6, kind="softmax"), rel=1e-12)
        _step_at_theory(ds, {"beta": b}, 6)
    # at beta = 0 the heads act through Lambda = sum lambda_h only (§4)
    assert float(ds.theory_time.sel(beta=0.0)) == pytest.approx(float(theory.time_to_rho_beta0(0.999, Lambda=3.5, n=6)),
                                                                rel=1e-10)
    uniform = phase_diagram(_heads(), {"beta": betas}, **SMALL)
    assert float(uniform.clustered_pairs.isel(time=0).max()) == 0.0 and np.all(uniform.clustered_pairs_se >= 0)


def test_three_heads_over_the_spread_at_fixed_beta():
    spreads = [0.0, 0.5, 1.0]
    ds = phase_diagram(_heads(beta=4.0), {"spread": spreads}, **{**SMALL, "t1": 4.0, "n_saves": 41},
                       init="equiangular")
    assert ds.n_clusters.dims == ("spread", "time")
    for s in spreads:  # lambda_h = mean + s (lambda_h - mean): equal heads of the same total at s = 0
        lam = np.mean(LAMBDAS) + s * (np.asarray(LAMBDAS) - np.mean(LAMBDAS))
        assert float(ds.theory_time.sel(spread=s)) == pytest.approx(
            theory.hitting_time(0.0, 0.999, lambdas=lam, beta=4.0, n=6, kind="softmax"), rel=1e-12)
        _step_at_theory(ds, {"spread": s}, 6)
    assert len(np.unique(ds.theory_time.values)) == 3  # the spread matters at beta > 0


@pytest.mark.parametrize("kind,d", [("softmax", 5), ("usa", 9)])
def test_one_identity_head_gives_the_numbers_of_the_beta_values_form(kind, d):
    # d = 5 < n runs in all coordinates, d = 9 > n in the tokens' span: both forms draw and step the same
    opts = {**SMALL, "dt": 0.05}
    old = phase_diagram([0.0, 2.0], d=d, kind=kind, **opts)
    new = phase_diagram(MultiHead(np.eye(d), kind=kind), {"beta": [0.0, 2.0]}, **opts)
    for v in old.data_vars:
        np.testing.assert_array_equal(new[v].values, old[v].values)


def test_a_model_function_over_the_number_of_heads():
    def heads(point):
        return MultiHead.scalar([1.0] * point["H"], d=8, beta=2.0, kind="softmax")

    ds = phase_diagram(heads, {"H": [1, 2, 3]}, **{**SMALL, "t1": 3.0, "n_saves": 31}, init="equiangular")
    assert ds.clustered_pairs.dims == ("H", "time") and ds.H.attrs["long_name"] == "number of heads"
    for H in (1, 2, 3):
        assert float(ds.theory_time.sel(H=H)) == pytest.approx(
            theory.hitting_time(0.0, 0.999, lambdas=[1.0] * H, beta=2.0, n=6), rel=1e-12)
        _step_at_theory(ds, {"H": H}, 6)
    assert "test_phase_models" in ds.attrs["model_source"]


def test_a_grid_over_n_and_beta_and_its_plot(tmp_path):
    ds = phase_diagram(_heads(d=8), {"n": [4, 6], "beta": [0.5, 2.0]}, **SMALL)
    assert ds.clustered_pairs.dims == ("n", "beta", "time")
    law = theory.hitting_time(0.0, 0.999, lambdas=LAMBDAS, beta=2.0, n=4)
    assert float(ds.theory_time.sel(n=4, beta=2.0)) == pytest.approx(law)
    with pytest.raises(InvalidParameterError, match="axis="):
        metrics.plot_phase_diagram(ds)
    ax = metrics.plot_phase_diagram(ds.sel(n=6), axis="beta")
    assert ax.get_xlabel() == "inverse temperature"


def test_plot_of_the_spread(tmp_path):
    ds = phase_diagram(_heads(d=8, beta=3.0), {"spread": [0.0, 0.5, 1.0]}, **SMALL)
    ax = ds.attn.plot()
    assert ax.get_xlabel().startswith("spread")
    np.testing.assert_allclose(ax.lines[0].get_xdata(), [0.0, 0.5, 1.0])  # t* <= T = 3 at every spread
    np.testing.assert_allclose(ax.lines[0].get_ydata(), ds.theory_time.values)
    ax.figure.savefig(tmp_path / "spread.png")
    assert (tmp_path / "spread.png").stat().st_size > 0


def test_resume_from_a_store(tmp_path):
    def run():
        return phase_diagram(_heads(d=8), {"spread": [0.0, 1.0], "beta": [1.0, 2.0]}, store=tmp_path, **SMALL)

    first = run()
    files = sorted(f for f in os.listdir(tmp_path) if f.startswith("cell_"))  # (the store's index beside them)
    assert len(files) == 8  # 2 spreads x 2 betas x 2 chunks
    stamps = {f: os.stat(tmp_path / f).st_mtime_ns for f in files}
    os.unlink(tmp_path / files[0])
    again = run()
    xr.testing.assert_equal(first, again)
    assert all(os.stat(tmp_path / f).st_mtime_ns == stamps[f] for f in files[1:])  # loaded, not recomputed
    # a grid that grows keeps the cells of the points it had
    phase_diagram(_heads(d=8), {"spread": [0.0, 1.0, 2.0], "beta": [1.0, 2.0]}, store=tmp_path, **SMALL)
    assert all(os.stat(tmp_path / f).st_mtime_ns == stamps[f] for f in files[1:])
    assert len([f for f in os.listdir(tmp_path) if f.startswith("cell_")]) == 12


@pytest.mark.parametrize("case", ["general", "relu", "causal"])
def test_other_heads_equal_their_systems_run_one_by_one(case, rng):
    # heads that are not scalar run in all d coordinates (uniform tokens drawn there), causal masks on the
    # model's own field; the pooled statistics are those of each system simulated alone
    A = rng.standard_normal((2, 4, 4))
    heads = {"general": MultiHead(A + A.transpose(0, 2, 1), kind="softmax"),
             "relu": MultiHead.scalar([1.0, 0.5], d=4, kind="relu"),
             "causal": MultiHead.scalar([1.0, 0.5], d=4, kind="softmax", causal=True)}[case]
    ds = phase_diagram(heads, {"beta": [1.0]}, n=5, t1=1.0, n_systems=5, chunk=3, n_saves=2, dt=0.05, seed=3,
                       progress=False)
    assert ("theory_time" in ds) is False
    vals = {"clustered_pairs": [], "n_clusters": []}
    for k, c in enumerate([3, 2]):
        g = np.random.default_rng(np.random.SeedSequence(3, spawn_key=(k,)))
        x0 = g.standard_normal((c, 5, 4))  # d < n: the span's coordinates are all d (span_systems draws the same)
        x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
        for x in x0:
            xt = simulate(x, heads.replace(beta=1.0), t1=1.0, dt=0.05).x[-1][None]
            vals["clustered_pairs"].append(clustered_pair_fraction(xt)[0])
            vals["n_clusters"].append(n_clusters_batch(xt, eps=np.arccos(0.999))[0])
    for name, v in vals.items():
        assert float(ds[name].isel(beta=0)[-1]) == pytest.approx(np.mean(v), abs=1e-12)


@pytest.mark.parametrize("call,match", [
    (lambda: phase_diagram(MultiHead(np.diag([1.0, 2.0])), {"spread": [0.0]}), "scalar heads"),
    (lambda: phase_diagram(MultiHead(np.eye(3)), {"temperature": [1.0]}), "function of the grid point"),
    (lambda: phase_diagram(MultiHead(np.eye(3)), {"beta": [1.0]}, d=3), "come from the model"),
    (lambda: phase_diagram(MultiHead(np.eye(3))), "grid"),
    (lambda: phase_diagram([1.0], {"beta": [1.0]}), "grid"),
    (lambda: phase_diagram(MultiHead(np.eye(3)), {"beta": [1.0, 1.0]}), "distinct"),
    (lambda: phase_diagram(MultiHead(np.eye(3)), {"lam": [[1.0, 0.5], [1.0]]}), "numbers or strings"),
    (lambda: phase_diagram(lambda p: 3, {"beta": [1.0]}), "must return a particles.MultiHead"),
    (lambda: phase_diagram(MultiHead(np.eye(3)), {"beta": [1.0]}, n=4, init="equiangular"), "d >= n"),
    (lambda: phase_diagram(MultiHead(np.eye(3), causal=True), {"beta": [1.0]}, merge=1e-6), "merge"),
])
def test_bad_grids_and_models(call, match):
    with pytest.raises(InvalidParameterError, match=match):
        call()


def test_process_engine_takes_a_lambda_model_function():
    # (USA heads of strengths 1 and 2 at beta = 1 contract at consensus at rate e + 2e^2 = 17.5: dt = 0.1 keeps
    # RK4 inside its stability interval, 2.79)
    opts = dict(n=4, t1=1.0, n_systems=4, chunk=2, n_saves=2, dt=0.1, progress=False)

    def run(**kw):
        return phase_diagram(lambda p: MultiHead.scalar([1.0, p["lam"]], d=5, beta=1.0), {"lam": [0.5, 2.0]},
                             **opts, **kw)

    xr.testing.assert_equal(run(engine="process", max_workers=2), run())


def test_dask_engine_equals_serial():
    import distributed

    def run(**kw):
        return phase_diagram(_heads(d=8, beta=2.0), {"lambda_2": [1.0, 3.0]}, n=4, t1=1.0, n_systems=4, chunk=2,
                             n_saves=2, dt=0.1, progress=False, **kw)

    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=":0",
                            set_as_default=False) as client:
        serial = run()
        xr.testing.assert_equal(run(engine=client), serial)
    assert serial.lambda_2.attrs["long_name"] == "strength lambda_2 of head 2"
    law = theory.hitting_time(0.0, 0.999, lambdas=[0.5, 1.0, 3.0], beta=2.0, n=4)
    assert float(serial.theory_time.sel(lambda_2=3.0)) == pytest.approx(law)
