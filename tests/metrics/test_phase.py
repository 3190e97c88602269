"""metrics.phase_diagram: schema, the equiangular closed forms, resume, engines, bad input."""

import os

import numpy as np
import pytest
import xarray as xr

from metrics import clustered_pair_fraction, n_clusters_batch, phase_diagram
from particles import Ensemble, InvalidParameterError, MultiHead, SaveAt, simulate, theory


def _small(**kw):
    opts = dict(n=6, d=3, t1=4.0, n_systems=6, chunk=4, n_saves=5, dt=0.1)
    opts.update(kw)
    return phase_diagram([0.0, 2.0], **opts)


def test_schema_and_netcdf_round_trip(tmp_path):
    ds = _small()
    assert dict(ds.sizes) == {"beta": 2, "time": 5, "chunk": 2}
    for v in ("clustered_pairs", "clustered_pairs_se", "n_clusters", "n_clusters_se"):
        assert ds[v].dims == ("beta", "time")
        assert {"long_name", "units"} <= set(ds[v].attrs)
    assert ds.theory_time.dims == ("beta",) and ds.success.dims == ("beta", "chunk")
    for c in ds.coords:
        assert {"long_name", "units"} <= set(ds[c].attrs)
    assert ds.attrs["n"] == 6 and ds.attrs["kind"] == "softmax" and "config" in ds.attrs
    # t = 0: uniform tokens in d = 3 are a.s. pairwise apart, so nothing is clustered yet
    assert np.all(ds.clustered_pairs.isel(time=0) == 0) and np.all(ds.n_clusters.isel(time=0) == 6)
    path = tmp_path / "pd.nc"
    ds.to_netcdf(path, engine="netcdf4")
    with xr.open_dataset(path, engine="netcdf4") as back:
        xr.testing.assert_identical(back.load(), ds)


@pytest.mark.parametrize("kind,betas,t1,dt", [("softmax", [0.0, 1.0, 3.0], 8.0, 0.05),
                                               ("usa", [0.0, 1.0, 3.0], 5.0, 0.01)])
def test_equiangular_tokens_cluster_exactly_at_the_theory_time(kind, betas, t1, dt):
    # orthonormal tokens stay equiangular (docs/theory.md §4): every pair reaches rho_c at t*(beta),
    # so the clustered fraction is the step 1{t > t*} and the count jumps from n to 1 there
    n = 6
    ds = phase_diagram(betas, n=n, d=n, kind=kind, t1=t1, n_systems=3, chunk=2, n_saves=41, dt=dt,
                       init="equiangular", seed=3)
    t = ds.time.values
    for b in betas:
        tstar = float(ds.theory_time.sel(beta=b))
        assert tstar == pytest.approx(theory.hitting_time(0.0, 0.999, lambdas=[1.0], beta=b, n=n, kind=kind), rel=1e-12)
        far = np.abs(t - tstar) > 0.05 * tstar
        frac = ds.clustered_pairs.sel(beta=b).values
        np.testing.assert_array_equal(frac[far], (t[far] > tstar).astype(float))
        np.testing.assert_array_equal(ds.n_clusters.sel(beta=b).values[far], np.where(t[far] > tstar, 1.0, n))
        assert np.all(ds.clustered_pairs_se.sel(beta=b).values[far] == 0)
    # beta = 0: the closed form ln((1 + (n-1) r)/(1 - r))/2 of §4
    assert float(ds.theory_time.sel(beta=0.0)) == pytest.approx(float(theory.time_to_rho_beta0(0.999, Lambda=1.0, n=n)),
                                                                rel=1e-10)


def test_every_system_clusters_where_theory_says_so():
    # beta = 0: x_i' = P_{x_i} mean(x), every pair converges like e^{-2t}; by T = 30 (>> t* = 4.9)
    # all systems are one cluster, with zero standard error
    ds = phase_diagram([0.0], n=8, d=4, t1=30.0, n_systems=20, chunk=10, n_saves=2, dt=0.2, seed=1)
    assert float(ds.theory_time[0]) < 30.0
    assert float(ds.clustered_pairs[0, -1]) == 1.0 and float(ds.clustered_pairs_se[0, -1]) == 0.0
    assert float(ds.n_clusters[0, -1]) == 1.0


def test_mean_and_standard_error_pool_the_chunks():
    # redo the 7 systems of beta = 2 one by one (chunk k draws from SeedSequence(entropy, spawn_key=(k,)))
    # and compare with the pooled mean and s / sqrt(S) of the dataset, chunks of 3 + 3 + 1
    ds = _small(n_systems=7, chunk=3, n_saves=2, seed=5)
    vals = {"clustered_pairs": [], "n_clusters": []}
    for k, c in enumerate([3, 3, 1]):
        rng = np.random.default_rng(np.random.SeedSequence(5, spawn_key=(k,)))
        x0 = rng.standard_normal((c, 6, 3))
        x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
        for x in x0:
            xt = simulate(x, MultiHead(np.eye(3), beta=2.0, kind="softmax"), t1=4.0, dt=0.1).x[-1][None]
            vals["clustered_pairs"].append(clustered_pair_fraction(xt)[0])
            vals["n_clusters"].append(n_clusters_batch(xt, eps=np.arccos(0.999))[0])
    for name, v in vals.items():
        assert float(ds[name].sel(beta=2.0)[-1]) == pytest.approx(np.mean(v), abs=1e-12)
        assert float(ds[f"{name}_se"].sel(beta=2.0)[-1]) == pytest.approx(np.std(v, ddof=1) / np.sqrt(7), abs=1e-12)
    assert np.std(vals["clustered_pairs"]) > 0  # the check above is not 0 == 0


def test_resume_from_store(tmp_path):
    first = _small(store=tmp_path)
    files = sorted(p.name for p in tmp_path.glob("cell_*.nc"))
    assert len(files) == 4  # 2 betas x 2 chunks (beside them, the store's index and its lock)
    stamps = {f: os.stat(tmp_path / f).st_mtime_ns for f in files}
    os.unlink(tmp_path / files[0])
    again = _small(store=tmp_path)
    xr.testing.assert_equal(first, again)
    for f in files[1:]:  # the finished cells were loaded, not recomputed
        assert os.stat(tmp_path / f).st_mtime_ns == stamps[f]
    assert sorted(p.name for p in tmp_path.glob("cell_*.nc")) == files


def test_process_engine_equals_serial():
    xr.testing.assert_equal(_small(engine="process", max_workers=2), _small())


def test_clustered_pair_fraction_counts_pairs(rng):
    x = rng.standard_normal((3, 5, 4))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    x[0] = x[0, :1]  # one point five times: every pair clustered
    G = np.einsum("sid,sjd->sij", x, x)
    expect = [(np.triu(G[s] >= 0.5, 1)).sum() / 10 for s in range(3)]
    np.testing.assert_allclose(clustered_pair_fraction(x, rho_c=0.5), expect)
    assert clustered_pair_fraction(x)[0] == 1.0


@pytest.mark.parametrize("kw,match", [
    ({"betas": [-1.0, 1.0]}, "model"),
    ({"betas": [1.0, 1.0]}, "distinct"),
    ({"kind": "relu"}, "kind"),
    ({"statistic": "energy"}, "statistic"),
    ({"init": "equiangular", "n": 8, "d": 3}, "d >= n"),
    ({"n_systems": 1}, "n_systems"),
    ({"rho_c": 1.0}, "rho_c"),
    ({"method": "euler_maruyama"}, "method"),
])
def test_bad_input(kw, match):
    betas = kw.pop("betas", [1.0])
    with pytest.raises(InvalidParameterError, match=match):
        phase_diagram(betas, **kw)


def test_cluster_counts_equal_n_clusters_batch(rng):
    from metrics._observables.pairs import cluster_counts as _cluster_counts

    for d in (2, 5):
        centres = rng.standard_normal((4, 3, d))
        x = np.repeat(centres, 4, axis=1) + 0.01 * rng.standard_normal((4, 12, d))
        x /= np.linalg.norm(x, axis=-1, keepdims=True)
        for eps in (1e-4, 0.05, 0.5, 2.0):  # no pair linked, clusters, everything linked
            np.testing.assert_array_equal(_cluster_counts(x, eps), n_clusters_batch(x, eps=eps))
        # one stack with a collapsed system, a scattered one and a clustered one
        mixed = np.stack([np.repeat(x[0, :1], 12, axis=0), rng.standard_normal((12, d)), x[1]])
        mixed /= np.linalg.norm(mixed, axis=-1, keepdims=True)
        counts = _cluster_counts(mixed, 0.05)
        np.testing.assert_array_equal(counts, n_clusters_batch(mixed, eps=0.05))
        assert counts[0] == 1 and counts[2] == 3


@pytest.mark.parametrize("d", [9, 64])
def test_reduced_coordinates_have_the_law_of_uniform_tokens(d):
    # Bartlett coordinates of n < d uniform tokens: <x_i, x_j> has mean 0 and variance 1/d
    from metrics._observables.pairs import span_systems as _initial

    n = 8
    x = _initial(2000, n, d, "uniform", np.random.default_rng(0))
    assert x.shape == (2000, n, n)
    np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 1.0, atol=1e-14)
    iu, ju = np.triu_indices(n, 1)
    g = np.einsum("sid,sjd->sij", x, x)[:, iu, ju].ravel()
    se = np.sqrt(2.0 / d**2 / g.size)  # Var(g^2) ~ 2/d^2 for nearly Gaussian g
    assert abs(g.mean()) < 5 / np.sqrt(d * g.size)
    assert abs(np.mean(g**2) - 1 / d) < 5 * se
    assert abs(np.mean(g**4) / np.mean(g**2) ** 2 - 3 * d / (d + 2)) < 0.1  # E g^4 = 3/(d(d+2))


@pytest.mark.parametrize("kind,t1,dt", [("softmax", 12.0, 0.25), ("usa", 8.0, 0.02)])
def test_dropping_settled_systems_changes_nothing(kind, t1, dt):
    # a cap of radius < pi/2 holding every token is forward invariant: systems certified inside
    # one of radius arccos(rho_c)/2 keep statistics 1, so leaving them out is exact (RK4 lands on
    # every save time either way, so the remaining systems take the same steps)
    opts = dict(n=8, d=3, kind=kind, t1=t1, n_systems=12, chunk=12, n_saves=13, dt=dt, seed=2)
    full = phase_diagram([0.0, 1.0, 3.0], drop_settled=False, **opts)
    fast = phase_diagram([0.0, 1.0, 3.0], **opts)
    assert float(full.clustered_pairs.isel(time=-1).max()) == 1.0  # some systems did settle
    for v in ("clustered_pairs", "clustered_pairs_se", "n_clusters", "n_clusters_se"):
        np.testing.assert_allclose(fast[v], full[v], rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", ["dopri5_systems", "rkc"])
def test_adaptive_methods_give_the_shared_steps_statistics(method):
    """USA systems (beta up to 6): a step per system, or Runge-Kutta-Chebyshev with the Jacobian
    bound, at rtol 1e-8 against the shared dopri5 step at rtol 1e-10: same statistics at every
    save time, with and without leaving the settled systems out."""
    opts = dict(n=8, d=3, kind="usa", t1=1.0, n_systems=12, chunk=12, n_saves=11, dt=1e-3, seed=4)
    ref = phase_diagram([1.0, 3.0, 6.0], method="dopri5", rtol=1e-10, **opts)
    assert 0.0 < float(ref.clustered_pairs.isel(time=-1).mean()) < 1.0
    for drop in (True, False):
        got = phase_diagram([1.0, 3.0, 6.0], method=method, rtol=1e-8, drop_settled=drop, **opts)
        for v in ("clustered_pairs", "n_clusters"):
            np.testing.assert_allclose(got[v], ref[v], rtol=0, atol=1e-12)


def test_a_cap_is_forward_invariant(rng):
    # tokens within 0.15 of e_3 (so within 0.3 of their mean), a run at several beta: the angle to
    # e_3 never exceeds 0.15: the cap around e_3 is forward invariant
    x0 = rng.uniform(-0.1, 0.1, (4, 10, 3)) * np.array([1.0, 1.0, 0.0]) + np.array([0, 0, 1.0])  # angles < 0.15
    x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    ens = Ensemble(np.eye(3), beta=[0.0, 1.0, 5.0, 20.0])
    assert np.all(ens.settled(x0, 0.6)) and not np.any(ens.settled(x0, 0.02))
    traj = simulate(x0, ens, t1=3.0, dt=0.01, save=SaveAt(ts=np.linspace(0, 3, 31)))
    cosines = np.einsum("tsnd,d->tsn", traj.x, [0, 0, 1.0]).min(axis=-1)
    assert np.all(cosines[0] < np.cos(0.1)) and np.all(cosines >= np.cos(np.arctan(0.1 * np.sqrt(2))) - 1e-12)


def test_runs_at_d_65536_without_a_d_by_d_matrix():
    # n tokens in R^d, d > n, run in their span (n coordinates): nothing of size d x d is built, not even the
    # model run_sweep records (an identity of size 65536 takes 32 GiB)
    import tracemalloc

    tracemalloc.start()
    try:
        ds = phase_diagram([1.0], n=3, d=65536, t1=0.5, n_systems=2, n_saves=2, dt=0.25, progress=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert ds.attrs["d"] == 65536 and ds.clustered_pairs.shape == (1, 2)
    assert peak < 2**28  # far below the 8 d^2 = 32 GiB of a d x d matrix
