"""Transport against spectral solutions: closed forms for uniform measures, agreement between the
S^2 and zonal constructions, and the exact CDF against a fine quantile grid."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import meanfield as mf
import particles
from metrics import circle_quantile_atoms, circle_wasserstein
from metrics.spectral_reference import (
    SpectralSlicedReference,
    circle_spectral_quantiles,
    circle_spectral_wasserstein,
)


def uniform_solution(d, L=6):
    model = particles.MultiHead.scalar([1.0], d=d, kind="softmax")
    if d == 2:
        pts, areas = mf.circle_grid(32)
        mu0 = mf.GridMeasure(pts, areas, areas / areas.sum())
    elif d == 3:
        pts, w = mf.sphere_quadrature(3, n=L + 1)
        mu0 = mf.GridMeasure(pts, 4 * np.pi * w, w)
    else:
        mu0 = mf.ZonalMeasure(lambda x: 1 + 0 * x[:, 0], d=d)
    return mf.wasserstein_ascent(mu0, model, t1=0.1, n_saves=2, scheme="spectral", L=L).info["solution"]


def test_circle_one_atom_against_uniform():
    """W1 = mean distance π/2, W2 = (∫_0^π t² dt/π)^{1/2} = π/√3, within the returned bound."""
    sol = uniform_solution(2)
    for p, exact in ((1, np.pi / 2), (2, np.pi / np.sqrt(3))):
        value, bound = circle_spectral_wasserstein(np.array([0.7]), sol, 0, p=p)
        assert abs(value - exact) <= bound and bound < 2e-3


def test_circle_exact_cdf_against_fine_quantile_atoms(rng):
    model = particles.MultiHead.scalar([1.0], d=2, beta=2.0, kind="softmax")
    pts, areas = mf.circle_grid(128)
    mu0 = mf.GridMeasure.from_density(pts, areas, lambda x: np.exp(np.cos(np.arctan2(x[:, 1], x[:, 0]))))
    sol = mf.wasserstein_ascent(mu0, model, t1=0.5, n_saves=2, scheme="spectral", L=40,
                                tol=1e-6).info["solution"]
    # the quantiles invert the closed-form CDF: F(Q(s)) = s by the trapezoid rule on a fine grid
    q, cells = circle_spectral_quantiles(sol, 1, M=64)
    m = 2**15
    fine = (np.arange(m) + 0.5) * 2 * np.pi / m
    rho = sol.density(1, np.stack([np.cos(fine), np.sin(fine)], 1))
    for j in (0, 17, 40, 63):
        F = np.sum(rho * (fine < q[j])) / m  # midpoint rule on cells wholly below Q(s)
        assert abs(F - (j + 0.5) / 64) <= 2 * rho.max() / m
    assert cells.sum() == pytest.approx(2 * np.pi, rel=1e-12)
    # W_p against the fine piecewise-uniform grid measure: same value to its O(1/m) error
    theta = rng.uniform(0, 2 * np.pi, 500)
    grid_atoms = circle_quantile_atoms(rho / rho.sum(), 16 * 500) - np.pi / m  # grid cells start at 0
    for p in (1, 2):
        value, bound = circle_spectral_wasserstein(theta, sol, 1, p=p)
        assert value == pytest.approx(circle_wasserstein(theta, grid_atoms, p=p, method="circle")[0],
                                      abs=bound + 4 * np.pi / m)


@pytest.mark.parametrize("d", [3, 5])
def test_sliced_one_point_against_uniform(d):
    """δ_x against σ: W2² of the projections is E T² + <θ,x>² = 1/d + <θ,x>², mean 2/d over θ;
    with the reference's own directions the value is exact up to the quantisation bound."""
    ref = SpectralSlicedReference(uniform_solution(d), n_projections=64, n_quantiles=4096)
    x = np.eye(d)[:1]
    w = ref.per_projection(x, 0)
    a2 = (ref.theta @ x[0]) ** 2
    np.testing.assert_allclose(w, 1 / d + a2, atol=4 * ref.error[0])


def test_zonal_d3_reference_matches_the_sphere_reference(rng):
    model = particles.MultiHead.scalar([1.0], d=3, beta=2.0, kind="softmax")
    fn = lambda x: np.exp(x[:, 2])  # noqa: E731
    pts, w = mf.sphere_quadrature(3, n=20)
    rs = mf.wasserstein_ascent(mf.GridMeasure.from_density(pts, 4 * np.pi * w, fn), model, t1=0.3, n_saves=2,
                               scheme="spectral", L=19, tol=1e-6)
    rz = mf.wasserstein_ascent(mf.ZonalMeasure(fn, d=3), model, t1=0.3, n_saves=2, scheme="spectral", L=19,
                               tol=1e-6)
    a = SpectralSlicedReference(rs.info["solution"], n_projections=16, n_quantiles=2048)
    b = SpectralSlicedReference(rz.info["solution"], n_projections=16, n_quantiles=2048)
    np.testing.assert_allclose(a.atoms, b.atoms, atol=1e-9)
    x = particles.sample_uniform(300, d=3, rng=rng)
    assert a(x, 1)[0] == pytest.approx(b(x, 1)[0], rel=1e-9)


def test_bad_input():
    sol = uniform_solution(3)
    with pytest.raises(ValueError, match="needs a spectral solution on circle"):
        circle_spectral_quantiles(sol, 0, M=10)
    with pytest.raises(TypeError, match="solution"):
        SpectralSlicedReference(np.eye(3))
    with pytest.raises(ValueError, match="'theta' parameter of circle_spectral_wasserstein must be finite"):
        circle_spectral_wasserstein(np.array([np.nan]), uniform_solution(2), 0)


def test_points_on_the_circle_are_their_angles_never_flattened(rng):
    """(n, 2) points are n tokens at their angles, not 2n numbers read as angles."""
    sol = uniform_solution(2)
    x = particles.sample_uniform(7, d=2, rng=rng)
    theta = np.arctan2(x[:, 1], x[:, 0])
    assert circle_spectral_wasserstein(x, sol, 0) == circle_spectral_wasserstein(theta, sol, 0)
    with pytest.raises(ValueError, match=r"'theta' parameter .* \(n, 2\); got shape \(7, 3\)"):
        circle_spectral_wasserstein(np.ones((7, 3)), sol, 0)
    with pytest.raises(ValueError, match="'theta' parameter .* must lie on the unit sphere"):
        circle_spectral_wasserstein(2 * x, sol, 0)


def test_a_string_seed_is_refused_naming_rng():
    from metrics.spectral_reference import circle_spectral_sample

    with pytest.raises(ValueError, match="'rng' parameter of circle_spectral_sample must be"):
        circle_spectral_sample(uniform_solution(2), 0, n=3, rng="seed")


def test_zonal_attention_entropy_matches_quadrature_on_the_sphere():
    """The Funk–Hecke entropy of a zonal solution (d = 3) against the study's quadrature entropy of
    the S^2 solution of the same problem (a repulsive head included)."""
    from metrics._studies.reference import measure_entropy
    from metrics._studies.spectral_reference import _zonal_entropy

    model = particles.MultiHead.scalar([1.0, -0.5], d=3, beta=2.0, kind="softmax", summation="exact")
    fn = lambda x: np.exp(x[:, 2])  # noqa: E731
    pts, w = mf.sphere_quadrature(3, n=20)
    rs = mf.wasserstein_ascent(mf.GridMeasure.from_density(pts, 4 * np.pi * w, fn), model, t1=0.2, n_saves=2,
                               scheme="spectral", L=19, tol=1e-6)
    rz = mf.wasserstein_ascent(mf.ZonalMeasure(fn, d=3), model, t1=0.2, n_saves=2, scheme="spectral", L=19,
                               tol=1e-6)
    for k in range(2):
        assert _zonal_entropy(model, rz.info["solution"], k) == pytest.approx(
            measure_entropy(model, rs.points, np.maximum(rs.mass[k], 0)), abs=1e-8)


def test_study_falls_back_when_the_flow_outgrows_the_band_limit():
    """Clusters sharpen past max_L = m_grid / 2: the study keeps the finite-volume reference and says why."""
    from metrics import mean_field_limit_study

    model = particles.MultiHead.scalar([1.0], d=2, beta=8.0, kind="softmax")
    ds = mean_field_limit_study(model, lambda y: 1 + 0.5 * y[:, 0], n_values=(16, 32), n_seeds=1, t1=4.0,
                                n_saves=2, m_grid=32, dt=0.1, n_boot=10)
    assert "fv_circle" in ds.attrs["reference"]
    assert "spectral reference not used" in ds.attrs["reference_note"] and "max_L=16" in ds.attrs["reference_note"]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40), M=st.integers(1, 30), seed=st.integers(0, 2**32 - 1), graded=st.booleans())
def test_linear_quantile_nodes_exact_w2(n, M, seed, graded):
    """W2^2 of n sorted tokens against a piecewise-linear quantile function (nodes at uniform or random
    levels) is the integral int_0^1 (F_n^{-1}(s) - Q(s))^2 ds: checked against a fine midpoint rule."""
    from metrics import SlicedReference

    rng = np.random.default_rng(seed)
    nodes = np.sort(rng.uniform(-1, 1, M + 1))
    levels = np.r_[0.0, np.sort(rng.uniform(0.01, 0.99, M - 1)), 1.0] if graded else np.arange(M + 1) / M
    if np.any(np.diff(levels) <= 0):
        levels = np.arange(M + 1) / M
    theta = np.array([[0.0, 0.0, 1.0]])
    x = particles.sample_uniform(n, d=3, rng=rng)
    R = SlicedReference.from_quantile_nodes(theta, nodes[None, :, None], levels if graded else None)
    s = (np.arange(4000 * n * M) + 0.5) / (4000 * n * M)
    Q = np.interp(s, levels, nodes)
    Fn = np.sort(x[:, 2])[np.minimum((s * n).astype(int), n - 1)]
    assert R.per_projection(x, 0)[0] == pytest.approx(np.mean((Fn - Q) ** 2), rel=1e-5, abs=1e-12)


@pytest.mark.parametrize("d", [3, 8])
def test_interpolation_error_estimate_against_finer_nodes(d):
    """The reported error of the piecewise-linear reference is an upper estimate of its actual SW2 to
    the exact reference (measured against 16x more nodes), within 10x, and second order in M (the graded
    end cells remove the infinite slope of the quantile function at 0 and 1 for d >= 4); M mid-quantile
    atoms of the same law are first order, far worse."""
    model = particles.MultiHead.scalar([1.0], d=d, beta=2.0, kind="softmax")
    fn = lambda x: np.exp(2 * x[:, -1])  # noqa: E731
    if d == 3:
        pts, w = mf.sphere_quadrature(3, n=24)
        mu0 = mf.GridMeasure.from_density(pts, 4 * np.pi * w, fn)
    else:
        mu0 = mf.ZonalMeasure(fn, d=d)
    sol = mf.wasserstein_ascent(mu0, model, t1=0.3, n_saves=2, scheme="spectral", L=23, tol=1e-8).info["solution"]
    coarse = SpectralSlicedReference(sol, n_projections=8, n_quantiles=256)
    fine = SpectralSlicedReference(sol, n_projections=8, n_quantiles=4096)
    s = np.sort(np.concatenate([(np.arange(4096 * 8) + 0.5) / (4096 * 8), fine.levels]))
    w = np.gradient(s)  # trapezoid-like weights on the non-uniform grid
    for k in range(2):
        exact = np.stack([np.interp(s, fine.levels, fine.atoms[k][:, j]) for j in range(8)])
        lin = np.stack([np.interp(s, coarse.levels, coarse.atoms[k][:, j]) for j in range(8)])
        step = np.stack([np.interp((np.floor(s * 256) + 0.5) / 256, fine.levels, fine.atoms[k][:, j])
                         for j in range(8)])
        actual = np.sqrt(np.mean((lin - exact) ** 2 @ w))
        assert actual <= coarse.error[k] <= 10 * actual
        assert fine.error[k] < coarse.error[k] / 100  # second order: 16^2 = 256
        assert np.sqrt(np.mean((step - exact) ** 2 @ w)) > 10 * coarse.error[k]


def test_the_s2_reference_goes_to_max_L_1024_on_ducc0s_transforms(monkeypatch):
    """The S^2 study reference's band-limit cap: 1024 with ducc0 (seconds per step), 128 on the Legendre tables
    (0.4 L^3 doubles); S^1 and zonal caps unchanged."""
    import sys

    from metrics._studies.spectral_reference import _default_max_L

    pytest.importorskip("ducc0")
    assert (_default_max_L(2, 4096), _default_max_L(3, 256), _default_max_L(8, 256)) == (2048, 1024, 512)
    monkeypatch.setitem(sys.modules, "ducc0", None)
    assert _default_max_L(3, 256) == 128
