"""The mean-field limit study at scale: schema, rates, transport agreement, resume, bad input."""

import json

import numpy as np
import ot
import pytest
import xarray as xr

import metrics
from metrics import mean_field_limit_study
from metrics._observables.clustering import bounded_clusters
from particles import MultiHead
from particles.validation import InvalidParameterError


def _density(x):
    return 1 + 0.5 * x[:, 0]  # 1 + 0.5 cos(theta)


MODEL = MultiHead.scalar([1.0, 0.5], d=2, beta=2.0, kind="softmax")


@pytest.fixture(scope="module")
def study():
    return mean_field_limit_study(MODEL, _density, n_values=(32, 128, 512), n_seeds=3, t1=0.2, n_saves=2,
                                  m_grid=128, dt=0.1, n_boot=200)


def test_schema_and_attrs(study):
    ds = study
    assert ds.w1.dims == ("n_particles", "seed", "time")
    assert ds.cluster_mass.dims == ("n_particles", "seed", "time", "cluster_rank")
    for v in ("w1", "w2", "energy_gap", "entropy_gap", "n_clusters", "rate_w1", "rate_w1_ci", "rate_energy_gap_ci"):
        assert v in ds and ds[v].attrs["long_name"] and "units" in ds[v].attrs
    # cluster masses are a sub-probability vector, decreasing
    m = ds.cluster_mass.values
    assert np.all(m >= 0) and np.all(m.sum(-1) <= 1 + 1e-12) and np.all(np.diff(m, axis=-1) <= 1e-15)
    lo, hi = ds.rate_w1_ci.values.T
    assert np.all(lo <= ds.rate_w1.values) and np.all(ds.rate_w1.values <= hi)
    assert "circle closed form" in ds.attrs["transport_method"] and "spectral" in ds.attrs["reference"]
    # quantile atoms (2π/M, M ≥ 4 m_grid) plus π times the spectral tail
    assert ds.attrs["reference_error"] == pytest.approx(2 * np.pi / (4 * 128) + np.pi * ds.attrs["reference_tail"])
    # W1 <= W2 (Jensen) for every run
    assert np.all(ds.w1.values <= ds.w2.values + 1e-12)


def test_rate_minus_half_on_iid_samples_of_the_reference():
    """At t = 0 the particles are i.i.d. from the reference law: W1 ~ n^{-1/2}, exactly on S^1
    (E W1 = ∫ E|F_n - F - med| ≍ n^{-1/2}); the fitted slope is within 0.05 of it."""
    mass = np.ones(64) + 0.5 * np.cos(2 * np.pi * (np.arange(64) + 0.5) / 64)
    mass /= mass.sum()
    ns = np.array([100, 400, 1600, 6400, 25600])
    rng = np.random.default_rng(1)
    g = np.empty((len(ns), 16))
    for a, n in enumerate(ns):
        atoms = metrics.circle_quantile_atoms(mass, 4 * n)
        for s in range(g.shape[1]):
            k = rng.choice(64, size=n, p=mass)
            theta = (k + rng.uniform(size=n)) * 2 * np.pi / 64
            g[a, s] = metrics.circle_wasserstein(theta, atoms, p=1, method="circle")[0]
    r, lo, hi = metrics.fit_rate(ns, g)[:3]
    # the target: the slope within 0.05 of -1/2, the interval around it and near -1/2
    assert abs(r + 0.5) < 0.05 and lo <= r <= hi and lo - 0.05 < -0.5 < hi + 0.05


@pytest.mark.parametrize("p", [1, 2])
def test_transport_methods_agree(p):
    rng = np.random.default_rng(2)
    mass = rng.uniform(0.2, 1.0, 32)
    mass /= mass.sum()
    atoms = metrics.circle_quantile_atoms(mass, 500)
    theta = rng.uniform(-np.pi, np.pi, 200)
    a, na = metrics.circle_wasserstein(theta, atoms, p=p, method="emd2")
    b, nb = metrics.circle_wasserstein(theta, atoms, p=p, method="circle")
    assert na == "ot.emd2" and nb != na
    assert a == pytest.approx(b, rel=1e-7, abs=1e-10)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_weighted_circle_wasserstein_matches_the_network_simplex(p):
    """Any two discrete measures (weights on both sides): closed form / binary search = emd2."""
    rng = np.random.default_rng(p)
    th, ph = rng.uniform(0, 2 * np.pi, 40), rng.uniform(-4, 4, 55)
    a, b = rng.uniform(0.1, 1, 40), rng.uniform(0.1, 1, 55)
    fast = metrics.circle_wasserstein(th, ph, p=p, weights=a, atom_weights=b)[0]
    slow = metrics.circle_wasserstein(th, ph, p=p, weights=a, atom_weights=b, method="emd2")[0]
    assert fast == pytest.approx(slow, rel=1e-8)
    # a metric: symmetric, zero on the diagonal, invariant under a common rotation
    assert metrics.circle_wasserstein(ph, th, p=p, weights=b, atom_weights=a)[0] == pytest.approx(fast, rel=1e-8)
    assert metrics.circle_wasserstein(th, th, p=p, weights=a, atom_weights=a)[0] == pytest.approx(0, abs=1e-6)
    assert metrics.circle_wasserstein(th + 1.3, ph + 1.3, p=p, weights=a, atom_weights=b)[0] == \
        pytest.approx(fast, rel=1e-8)
    with pytest.raises(InvalidParameterError, match="atom_weights"):
        metrics.circle_wasserstein(th, ph, p=p, atom_weights=b[:3])


def test_quantile_atoms_approximate_the_grid_measure():
    """W1 between M quantile atoms of a piecewise-uniform law and fine samples of it is O(1/M)."""
    mass = np.array([0.1, 0.4, 0.2, 0.3])
    coarse = metrics.circle_quantile_atoms(mass, 50)
    fine = metrics.circle_quantile_atoms(mass, 5000)
    assert metrics.circle_wasserstein(coarse, fine, p=1, method="circle")[0] < 2 * np.pi / 50


def test_bounded_clusters_circle_and_sphere():
    rng = np.random.default_rng(3)
    centres = np.array([0.0, 2.0, 4.0])
    theta = np.concatenate([c + 1e-4 * rng.standard_normal(k) for c, k in zip(centres, [500, 300, 200])])
    x = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    np.testing.assert_allclose(bounded_clusters(x, eps=1e-2), [0.5, 0.3, 0.2])
    # the same three clusters on the equator of S^2
    y = np.concatenate([x, np.zeros((len(x), 1))], axis=1)
    np.testing.assert_allclose(bounded_clusters(y, eps=1e-2), [0.5, 0.3, 0.2])
    # agrees with the DBSCAN clustering count of metrics.clustering
    assert metrics.n_clusters(y, eps=1e-2) == 3


def test_sphere_study_schema():
    model = MultiHead.scalar([1.0], d=3, beta=1.0, kind="usa")
    ds = mean_field_limit_study(model, lambda y: 1 + 0.5 * y[:, 2], n_values=(16, 64), n_seeds=2, t1=0.1,
                                n_saves=2, m_grid=64, dt=0.1, n_reference=256, n_projections=10,
                                n_boot=50, reference="lagrangian")
    assert {"sw2", "sw2_mc_error", "rate_sw2", "rate_sw2_ci"} <= set(ds.data_vars)
    assert np.all(ds.sw2_mc_error.values >= 0) and ds.attrs["reference_particles"] == 256
    assert "sliced SW_2" in ds.attrs["transport_method"]
    assert ds.reference_error.dims == ("time",) and np.all(ds.reference_error > 0)
    assert ds.attrs["reference_error"] == pytest.approx(float(ds.reference_error.max()))


def test_noisy_sphere_reference_is_brownian_motion(monkeypatch):
    """With no drift (W = 0) the noisy reference is Brownian motion on S^2 with generator κ⁻¹Δ:
    by the addition theorem E P_l(<x(t), x(0)>) = exp(-l(l+1)t/κ) (l = 1: the mean cosine decays at
    (d-1)/κ), and the mean of the degree-1 harmonic y_3 of the initial density decays at 2/κ. The
    fitted rates hold within 10% (Euler-Maruyama's O(dt) bias is ~3% here, the Monte-Carlo error
    ~2%); ignoring κ would give rate 0, and a generator 2κ⁻¹Δ twice the rate."""

    captured = []
    from metrics._studies import reference as ref_mod

    real = ref_mod.SlicedReference

    def spy(y, **kw):
        captured.append(np.asarray(y))
        return real(y, **kw)

    monkeypatch.setattr(ref_mod, "SlicedReference", spy)
    free = MultiHead.scalar([0.0], d=3, beta=1.0, kind="softmax")
    kappa, t1 = 2.0, 0.4
    ds = mean_field_limit_study(free, lambda y: 1 + 0.5 * y[:, 2], n_values=(16, 32), n_seeds=2, t1=t1,
                                n_saves=3, m_grid=64, dt=0.01, kappa=kappa, n_reference=2000, n_projections=16,
                                n_boot=50, reference="lagrangian")
    assert ds.attrs["kappa"] == kappa and np.all(np.isfinite(ds.sw2)) and np.all(ds.reference_error > 0)
    y = captured[0]  # (time, n_reference, 3): the reference run
    t = ds.time.values[1:]
    cos = np.einsum("tnd,nd->tn", y[1:], y[0])
    for l, moment in [(1, cos.mean(axis=1)), (2, ((3 * cos**2 - 1) / 2).mean(axis=1))]:
        np.testing.assert_allclose(-np.log(moment) / t, l * (l + 1) / kappa, rtol=0.1)
    # E_{mu0}[y_3] = 0.5 E_sigma[y_3^2] = 1/6 for the density 1 + y_3/2
    mean_y3 = y[:, :, 2].mean(axis=1)
    assert mean_y3[0] == pytest.approx(1 / 6, abs=4 * 0.58 / np.sqrt(2000))
    np.testing.assert_allclose(np.log(mean_y3[0] / mean_y3[1:]) / t, 2 / kappa, rtol=0.2)


def test_sliced_reference_is_exact_and_has_the_iid_rate():
    rng = np.random.default_rng(0)

    def unif(n):
        x = rng.standard_normal((n, 3))
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    y, x = unif(500), unif(300)
    R = metrics.SlicedReference(y[None], n_projections=40, n_quantiles=500, seed=3)
    _, log = ot.sliced_wasserstein_distance(x, y, projections=R.theta.T, p=2, log=True)
    np.testing.assert_allclose(R.per_projection(x, 0), log["projected_emds"], rtol=1e-10, atol=1e-14)
    # i.i.d. samples of the reference's law: SW_2 ~ n^{-1/2}
    R = metrics.SlicedReference(unif(200_000)[None], n_projections=64, seed=1)
    ns = np.array([100, 400, 1600, 6400])
    g = np.array([[R(unif(n), 0)[0] for _ in range(6)] for n in ns])
    r, lo, hi = metrics.fit_rate(ns, g)[:3]
    assert abs(r + 0.5) < 0.08 and lo <= r <= hi


def test_resume_after_a_crash(tmp_path, monkeypatch):
    kw = dict(n_values=(16, 32), n_seeds=2, t1=0.1, n_saves=2, m_grid=64, dt=0.1, n_boot=50, store=tmp_path)
    full = mean_field_limit_study(MODEL, _density, **kw)
    files = sorted(tmp_path.glob("cell_*.nc"))
    assert len(files) == 4
    files[0].unlink()  # a crash before the last cell was written
    stamps = {f: f.stat().st_mtime_ns for f in files[1:]}
    from metrics._studies import spec as study_mod

    calls = []
    real = study_mod.simulate

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(study_mod, "simulate", counting)
    again = mean_field_limit_study(MODEL, _density, **kw)
    assert len(calls) == 1  # only the missing cell is recomputed
    assert all(f.stat().st_mtime_ns == t for f, t in stamps.items())
    xr.testing.assert_allclose(full.drop_attrs(), again.drop_attrs())


def test_process_pool_gives_the_serial_dataset(tmp_path):
    kw = dict(n_values=(16, 32), n_seeds=2, t1=0.1, n_saves=2, m_grid=64, dt=0.1, n_boot=50)
    serial = mean_field_limit_study(MODEL, _density, **kw)
    pooled = mean_field_limit_study(MODEL, _density, engine="process", max_workers=2, store=tmp_path, **kw)
    assert len(list(tmp_path.glob("cell_*.nc"))) == 4
    xr.testing.assert_allclose(serial.drop_attrs(), pooled.drop_attrs())


@pytest.mark.parametrize("kwargs, name", [
    ({"n_values": (32, 16)}, "n_values"),
    ({"n_values": (0, 16)}, "n_values"),
    ({"n_values": (16.5, 32)}, "n_values"),
    ({"t1": 0.0}, "t1"),
    ({"t1": -1.0}, "t1"),
    ({"transport": "sinkhorn"}, "transport"),
])
def test_bad_input_names_the_argument(kwargs, name):
    with pytest.raises(InvalidParameterError, match=name):
        mean_field_limit_study(MODEL, _density, **kwargs)


def test_unpicklable_density_with_a_process_pool_is_refused_before_work():
    model = MultiHead.scalar([1.0], d=3, beta=1.0, kind="usa")
    with pytest.raises(InvalidParameterError, match="'density_fn' parameter of mean_field_limit_study must be "
                                                    "picklable"):
        mean_field_limit_study(model, lambda y: 1 + 0 * y[:, 0], n_values=(16, 32), engine="process")


def test_bad_density_and_model():
    with pytest.raises(InvalidParameterError, match="density_fn"):
        mean_field_limit_study(MODEL, lambda th: np.cos(th))
    with pytest.raises(InvalidParameterError, match="density_fn"):
        mean_field_limit_study(MODEL, lambda th: np.full_like(th, np.inf))
    relu = MultiHead.scalar([1.0], d=2, beta=1.0, kind="relu")
    with pytest.raises(InvalidParameterError, match="model"):
        mean_field_limit_study(relu, _density)


def test_density_of_the_angle_is_refused_with_the_helper_named():
    with pytest.raises(InvalidParameterError, match="density_of_angle"):
        mean_field_limit_study(MODEL, lambda th: 1 + 0.5 * np.cos(th))
    with pytest.raises(InvalidParameterError, match=r"shape \(m, 3\)"):
        mean_field_limit_study(MultiHead.scalar([1.0], d=3, beta=1.0, kind="usa"), lambda y: 1 + y[:, 3])
    # the helper gives the same study as the points form
    kw = dict(n_values=(8, 16), n_seeds=2, t1=0.1, n_saves=2, m_grid=64, dt=0.1)
    a = mean_field_limit_study(MODEL, _density, **kw)
    b = mean_field_limit_study(MODEL, metrics.density_of_angle(lambda th: 1 + 0.5 * np.cos(th)), **kw)
    np.testing.assert_allclose(a.w1.values, b.w1.values, rtol=1e-12)


@pytest.mark.parametrize("sampling", ["independent", "nested"])
def test_sampling_independent_or_nested(monkeypatch, sampling):
    """Independent: the samples of n = 16 and n = 32 for one seed are separate draws; nested: they
    come from one stream, so the first 16 draws pick the same grid cells (the paired interval is
    then used)."""
    import metrics._studies.reference as ref_mod

    drawn = {}
    real = ref_mod.sample_grid_measure

    def spy(mu, n, rng):
        x = real(mu, n, rng)
        drawn.setdefault(n, []).append(x)
        return x

    monkeypatch.setattr(ref_mod, "sample_grid_measure", spy)
    ds = mean_field_limit_study(MODEL, _density, n_values=(16, 32), n_seeds=2, t1=0.1, n_saves=2, m_grid=64,
                                dt=0.1, sampling=sampling, reference="fv_circle")
    def cells(x):
        return np.floor(np.mod(np.arctan2(x[:, 1], x[:, 0]), 2 * np.pi) / (2 * np.pi) * 64).astype(int)

    same = np.array_equal(cells(drawn[16][0]), cells(drawn[32][0])[:16])
    assert ds.attrs["sampling"] == sampling and ("paired" in ds.attrs["rate_interval"]) == (sampling == "nested")
    assert same == (sampling == "nested")
    # independent streams: the two seeds of one n differ, and so do the n = 16 draws across modes
    assert not np.allclose(drawn[16][0], drawn[16][1])


def test_sphere_reference_is_built_once_and_reused(tmp_path, monkeypatch):
    """With a store, the S^2 reference runs are saved with the cells and loaded on a rerun (no
    particle run at all the second time); a changed setting builds a new one."""
    import metrics._studies.spec as study_mod

    model = MultiHead.scalar([1.0], d=3, beta=1.0, kind="usa")
    kw = dict(n_values=(16, 32), n_seeds=2, t1=0.1, n_saves=2, m_grid=64, dt=0.05, n_reference=256,
              n_projections=16, store=tmp_path, reference="lagrangian")
    calls = []
    from metrics._studies import reference as ref_mod

    real = study_mod.simulate
    for module in (study_mod, ref_mod):  # the cells' runs and the reference's runs
        monkeypatch.setattr(module, "simulate", lambda x0, *a, **k: calls.append(len(x0)) or real(x0, *a, **k))
    first = mean_field_limit_study(model, lambda y: 1 + 0.5 * y[:, 2], **kw)
    assert sorted(calls) == [16, 16, 32, 32, 256, 256] and first.attrs["reference_cached"] == 0
    assert len(list(tmp_path.glob("reference_*.nc"))) == 1 and first.attrs["reference_build_seconds"] > 0
    calls.clear()
    again = mean_field_limit_study(model, lambda y: 1 + 0.5 * y[:, 2], **kw)
    assert calls == [] and again.attrs["reference_cached"] == 1
    for v in ("sw2", "reference_error", "energy_meanfield", "rate_sw2_ci"):
        np.testing.assert_array_equal(again[v].values, first[v].values)
    mean_field_limit_study(model, lambda y: 1 + 0.4 * y[:, 2], **kw)  # another density: another reference
    assert len(list(tmp_path.glob("reference_*.nc"))) == 2


def test_embedded_sliced_distance_matches_pot():
    """The study's SW_2 equals POT's sliced Wasserstein distance with the same directions (exact 1-d
    W_2 between clouds of different sizes); it is a metric (symmetric, zero on the diagonal)."""
    rng = np.random.default_rng(4)
    x = metrics.sample_sphere_density(lambda y: 1 + 0.5 * y[:, 2], 70, d=3, rng=rng)
    y = metrics.sample_sphere_density(lambda y: np.ones(len(y)), 45, d=3, rng=rng)
    ours, se = metrics.sliced_wasserstein_embedded(x, y, n_projections=64, seed=5)
    pot = ot.sliced_wasserstein_distance(x, y, n_projections=64, seed=5, p=2)
    assert ours == pytest.approx(pot, rel=1e-10) and 0 < se < ours
    assert metrics.sliced_wasserstein_embedded(y, x, n_projections=64, seed=5)[0] == pytest.approx(ours, rel=1e-12)
    assert metrics.sliced_wasserstein_embedded(x, x, n_projections=64, seed=5)[0] == 0.0


def test_circle_reference_is_cached_too(tmp_path, monkeypatch):
    import metrics._studies.limit as study_mod

    kw = dict(n_values=(8, 16), n_seeds=2, t1=0.1, n_saves=2, m_grid=64, dt=0.05, store=tmp_path, reference="fv_circle")
    first = mean_field_limit_study(MODEL, _density, **kw)
    assert first.attrs["reference_cached"] == 0 and len(list(tmp_path.glob("reference_*.nc"))) == 1
    # the cached file's time coordinate is every dataset's (long_name, units, log_time_scale) ...
    (path,) = tmp_path.glob("reference_*.nc")
    with xr.open_dataset(path) as cached:
        cached = cached.load()
    assert cached.time.attrs == first.time.attrs == metrics._data.dataset.time_coord([0.0], MODEL.log_time_scale)[2]
    # ... and a file written before it had those attrs (a plain time coordinate) still loads
    cached.time.attrs = {"long_name": "time", "units": "1"}
    cached.to_netcdf(path)
    (tmp_path / "headflow_index.jsonl").unlink()  # (a store of that time had no index: its digest is not known)

    def forbidden(*a, **k):
        raise AssertionError("the fv_circle reference was recomputed")

    monkeypatch.setattr(study_mod.mf, "wasserstein_ascent", forbidden)
    again = mean_field_limit_study(MODEL, _density, **kw)
    assert again.attrs["reference_cached"] == 1
    np.testing.assert_array_equal(again.w1.values, first.w1.values)
    np.testing.assert_array_equal(again.energy_meanfield.values, first.energy_meanfield.values)


def test_spectral_reference_by_default_where_it_applies():
    """S^2: the spectral reference and its bound at every save time; d = 4 with a density that is not
    zonal: the Lagrangian reference; reference='spectral' refuses what it does not cover."""
    model = MultiHead.scalar([1.0], d=3, beta=1.0, kind="softmax")
    ds = mean_field_limit_study(model, lambda y: 1 + 0.5 * y[:, 2], n_values=(16, 64), n_seeds=2, t1=0.1,
                                n_saves=2, m_grid=64, dt=0.1, n_projections=10, n_quantiles=2048, n_boot=50)
    assert "spectral" in ds.attrs["reference"] and ds.attrs["reference_tail"] < 1e-10
    assert ds.attrs["reference_error"] == pytest.approx(float(ds.reference_error.max()))
    assert np.all(ds.reference_error < 2e-3) and np.all(np.isfinite(ds.sw2))
    model4 = MultiHead.scalar([1.0], d=4, beta=1.0, kind="softmax")
    kw = dict(n_values=(16, 32), n_seeds=1, t1=0.1, n_saves=2, m_grid=64, dt=0.1, n_reference=64,
              n_projections=8, n_boot=10)
    ds4 = mean_field_limit_study(model4, lambda y: 1 + 0.5 * y[:, 0] * y[:, 1], **kw)
    assert "Lagrangian" in ds4.attrs["reference"]
    with pytest.raises(InvalidParameterError, match="reference='spectral' of mean_field_limit_study covers"):
        mean_field_limit_study(model4, lambda y: 1 + 0.5 * y[:, 0] * y[:, 1], reference="spectral", **kw)
    zonal = mean_field_limit_study(model4, lambda y: 1 + 0.5 * y[:, -1], **kw)
    assert "spectral" in zonal.attrs["reference"] and np.all(np.isfinite(zonal.entropy_meanfield))
    # n_reference sizes a Lagrangian fallback only: a spectral reference runs whatever it is
    # (regression: a fallback size below max(n_values) refused a study that never needed it)
    small = mean_field_limit_study(model4, lambda y: 1 + 0.5 * y[:, -1], **dict(kw, n_reference=8))
    assert "spectral" in small.attrs["reference"]


def test_seeds_per_n_run_only_the_new_cells_and_pad_with_nan(tmp_path, monkeypatch):
    """n_seeds=(4, 2): four seeds at n = 16, two at n = 32 (NaN beyond), n_seeds_run records it; with a
    store, raising the seeds of one n runs only the new cells (the cell keys do not depend on n_seeds)."""
    import metrics._studies.spec as study_mod

    calls = []
    real = study_mod.simulate
    monkeypatch.setattr(study_mod, "simulate", lambda x0, *a, **k: calls.append(len(x0)) or real(x0, *a, **k))
    kw = dict(n_values=(16, 32), t1=0.1, n_saves=2, m_grid=64, dt=0.05, store=tmp_path, reference="fv_circle")
    first = mean_field_limit_study(MODEL, _density, n_seeds=2, **kw)
    assert sorted(calls) == [16, 16, 32, 32]
    calls.clear()
    ds = mean_field_limit_study(MODEL, _density, n_seeds=(4, 2), **kw)
    assert sorted(calls) == [16, 16]  # seeds 2 and 3 of n = 16 only
    assert ds.sizes["seed"] == 4 and ds.n_seeds_run.values.tolist() == [4, 2]
    assert np.all(np.isnan(ds.w1.sel(n_particles=32).isel(seed=[2, 3]).values))
    np.testing.assert_array_equal(ds.w1.isel(seed=[0, 1]).values, first.w1.values)
    g = ds.w1.isel(time=0).values
    expect = metrics.fit_rate([16, 32], g, counts=[4, 2])
    assert float(ds.rate_w1[0]) == pytest.approx(expect.rate) and np.isfinite(ds.rate_w1_ci[0]).all()
    assert float(ds.w1_stderr.isel(time=0, n_particles=1)) == pytest.approx(np.std(g[1, :2], ddof=1) / np.sqrt(2))
    with pytest.raises(ValueError, match="n_seeds.*must be one integer, or have one entry per n_values entry"):
        mean_field_limit_study(MODEL, _density, n_seeds=(4, 2, 1), **kw)
    with pytest.raises(ValueError, match="must be one integer with sampling='nested'"):
        mean_field_limit_study(MODEL, _density, n_seeds=(4, 2), sampling="nested", **kw)


class _Stop(Exception):
    pass


def test_the_cells_get_no_density_so_a_lambda_runs_on_worker_processes(monkeypatch):
    """The cells never read density_fn (the reference carries its samples): the settings they receive leave it
    out, so a lambda density pickles for engine='process' on S^1, as it did before the settings were typed."""
    import pickle

    from metrics._runs import study_cells

    sent = {}

    def capture(grid, n_seeds, cell, settings, **kwargs):
        sent["study"] = settings
        raise _Stop

    monkeypatch.setattr(study_cells, "study_sweep", capture)
    with pytest.raises(_Stop):
        mean_field_limit_study(MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax"),
                               metrics.density_of_angle(lambda th: 1 + 0.5 * np.cos(th)), n_values=(8, 16),
                               n_seeds=1, t1=0.2, dt=0.1, n_saves=2, m_grid=64, progress=False)
    pickle.dumps(sent)
    assert sent["study"].density_fn is None and sent["study"].mean_field is not None


def test_a_study_whose_cells_all_fail_returns_them_named_by_n():
    """Noise that throws tokens more than a step may move: every cell fails. The study used to stop in
    fit_rate ("n_values of fit_rate must have at least 2 entries") and name the cells by the sweep's
    unused defaults (beta 1, softmax, d 3); now the rates are NaN and each cell is named by its n."""
    from metrics import FailedCellWarning

    model = MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax")
    with pytest.warns(FailedCellWarning, match=r"4 of 4 cells did not reach t1.*\{'n_particles': 8\} seed 0") as rec:
        ds = mean_field_limit_study(model, lambda x: 1 + 0.5 * x[:, 0], n_values=(8, 16), n_seeds=2, t1=0.4,
                                    n_saves=2, m_grid=128, dt=0.04, kappa=0.1, progress=False)
    assert "'beta'" not in str(rec[0].message) and "'kind'" not in str(rec[0].message)
    assert np.all(np.isnan(ds.rate_w2.values))
    assert len(json.loads(ds.attrs["failed_cells"])) == 4


def test_the_standard_error_of_huge_gaps_does_not_overflow():
    """USA heads at beta = 400 (rescaled time): energy gaps near 1e169, whose squares overflowed to an
    infinite standard error."""
    model = MultiHead.scalar([1.0], d=2, beta=400.0, kind="usa", log_time_scale="auto")
    ds = mean_field_limit_study(model, lambda x: 1 + 0.5 * x[:, 0], n_values=(8, 16), n_seeds=2, t1=0.2,
                                n_saves=2, m_grid=128, dt=0.02, progress=False)
    gap, se = ds.energy_gap.values, ds.energy_gap_stderr.values
    assert np.all(np.isfinite(se)) and np.all(se > 0) and np.nanmax(np.abs(gap)) > 1e150
    g = gap / 1e160  # the same standard error, computed on rescaled gaps
    want = np.std(g, axis=1, ddof=1) / np.sqrt(2) * 1e160
    np.testing.assert_allclose(se, want, rtol=1e-12)


def test_a_study_on_s3_reads_its_density_on_s3():
    """On S^{d-1}, d >= 4, the rejection bound of a density not zonal about the last axis (a Lagrangian
    reference) is read on points of S^{d-1}: it was read on a Fibonacci lattice of S^2, so every density of
    d columns (the CLI's families, a user's x[:, 3]) was refused with "got (16, 3)"."""
    from metrics._observables.density_families import FamilyDensity

    model = MultiHead.scalar([1.0], d=4, beta=1.0, kind="usa")
    for density in (FamilyDensity("cosine", 4, amplitude=0.5, mode=2), lambda x: 1 + 0.5 * x[:, 0] * x[:, 3]):
        ds = mean_field_limit_study(model, density, n_values=(8, 16), n_seeds=2, t1=0.1, n_saves=2, m_grid=16,
                                    dt=0.05, progress=False)
        assert ds.attrs["reference"].startswith("Lagrangian particle reference")
        assert np.all(np.isfinite(ds.sw2.values)) and ds.sw2.sizes["n_particles"] == 2


def test_the_rejection_bound_on_s3_holds_for_a_peaked_density():
    """On S^3 the bound is read on at least 4096 fixed draws: read on m_grid = 16 draws, a von Mises density of
    concentration 2 exceeded its bound while sampling (0.90 against 0.83) and the study was refused."""
    from metrics._observables.density_families import FamilyDensity

    model = MultiHead.scalar([1.0], d=4, beta=1.0, kind="usa")
    ds = mean_field_limit_study(model, FamilyDensity("von_mises", 4, concentration=2.0), n_values=(8, 16), n_seeds=2,
                                t1=0.1, n_saves=2, m_grid=16, dt=0.05, progress=False)
    assert np.all(np.isfinite(ds.sw2.values))


def test_one_seed_intervals_are_warned_and_commented():
    """A one-seed study cannot fit intervals: a RuntimeWarning says so, and so do the variables' attrs
    (the NaN is not silent)."""
    with pytest.warns(RuntimeWarning, match=r"one seed at n = \[8, 16\].*intervals of the fitted rates are NaN"):
        ds = mean_field_limit_study(MODEL, _density, n_values=(8, 16), n_seeds=1, t1=0.1, n_saves=2, m_grid=64,
                                    dt=0.05)
    assert np.isnan(ds.rate_w1_ci).all() and "one seed" in ds.rate_w1_ci.attrs["comment"]
    assert "one seed" in ds.rate_w1_stderr.attrs["comment"] and "one seed" in ds.w1_stderr.attrs["comment"]


def test_a_density_differing_only_in_a_high_mode_gets_its_own_cells(tmp_path):
    """Two densities equal at the 64 probe angles (a degree-64 mode aliases to a constant there) but apart
    on the reference's grid have different keys: the second study computes its own cells; the same density
    again reuses them (a smooth density keeps its probe key, the form of earlier stores)."""
    import pathlib
    import warnings

    from metrics._observables.density import probe_density
    from metrics._runs.keys import density_key, study_density_key

    base = metrics.density_of_angle(lambda th: 1 + 0.5 * np.cos(th))
    high = metrics.density_of_angle(lambda th: 1 + 0.5 * np.cos(th) + 0.2 * (np.cos(64 * th) - 1))
    np.testing.assert_allclose(probe_density(base, 2), probe_density(high, 2), rtol=1e-13)
    assert study_density_key(base, 2, 256) == density_key(probe_density(base, 2))  # determined by its probes
    assert study_density_key(high, 2, 256) != study_density_key(base, 2, 256)
    sphere = lambda x: 1 + 0.5 * x[:, 2]  # noqa: E731
    assert study_density_key(sphere, 3, 64) == density_key(probe_density(sphere, 3))
    assert study_density_key(lambda x: sphere(x) + 0.1 * np.cos(40 * x[:, 0]), 3, 64) != \
        study_density_key(sphere, 3, 64)

    model = MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax")

    def run(density):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return mean_field_limit_study(model, density, n_values=[8, 16], n_seeds=1, t1=0.2, dt=0.1, n_saves=2,
                                          m_grid=256, reference="fv_circle", store=tmp_path, progress=False)

    def names():
        return sorted(p.name for p in pathlib.Path(tmp_path).glob("cell_*.nc"))

    first = run(base)
    assert len(names()) == 2
    second = run(high)
    assert len(names()) == 4  # its own cells, not the first study's
    assert not np.array_equal(second.w1.values, first.w1.values)
    again = run(base)
    assert len(names()) == 4  # the same density resumes
    xr.testing.assert_identical(again.drop_attrs(), first.drop_attrs())
