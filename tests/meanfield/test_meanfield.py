"""Mean-field layer: cross-checks with particles, conservation, known values, orders, stability."""

import numpy as np
import pytest
from scipy.special import i0e

import meanfield as mf
from particles import MultiHead, SaveAt, sample_uniform, simulate
from particles.validation import InvalidParameterError
from tests.helpers import random_symmetric


def circle_density(m, fn):
    pts, areas = mf.circle_grid(m)
    return mf.GridMeasure.from_density(pts, areas, lambda y: fn(np.arctan2(y[:, 1], y[:, 0])))


def w1_circle(p, q):
    """W1 between two measures on the same uniform circle grid: ∫|G − median G| dθ, G = F_p − F_q."""
    G = np.cumsum(p - q)
    return float(np.abs(G - np.median(G)).sum() * 2 * np.pi / len(p))


@pytest.mark.parametrize("kind", ["usa", "softmax"])
def test_measure_velocity_and_energy_equal_particles(rng, kind):
    model = MultiHead(random_symmetric(rng, 2, 3), beta=1.4, kind=kind)
    x = sample_uniform(15, d=3, rng=rng)
    np.testing.assert_allclose(mf.measure_velocity(model, x), model.velocity(x), atol=1e-13)
    assert mf.measure_energy(model, x) == pytest.approx(model.energy(x), rel=1e-13)


@pytest.mark.parametrize("kind", ["usa", "softmax"])
def test_lagrangian_scheme_is_the_particle_flow(rng, kind):
    model = MultiHead(random_symmetric(rng, 2, 3), beta=1.0, kind=kind)
    x0 = sample_uniform(12, d=3, rng=rng)
    res = mf.wasserstein_ascent(mf.EmpiricalMeasure(x0), model, t1=1.0, n_saves=5, dt=0.01)
    traj = simulate(x0, model, t1=1.0, dt=0.01, save=SaveAt(ts=res.t))
    np.testing.assert_allclose(res.points, traj.x, atol=1e-12)
    np.testing.assert_allclose(res.mass.sum(1), 1.0, atol=1e-15)


def test_uniform_circle_energy_is_bessel():
    """∬ exp(β cos(θ−φ)) dθ dφ/(2π)² = I0(β), so E = I0(β)/(2β) for M = I."""
    for beta in (0.5, 3.0, 40.0):
        model = MultiHead(np.eye(2), beta=beta, kind="usa", log_time_scale=0.0)
        pts, areas = mf.circle_grid(512)
        logE = mf.measure_energy(model, pts, np.full(512, 1 / 512), log=True)
        assert logE == pytest.approx(np.log(i0e(beta)) + beta - np.log(2 * beta), rel=1e-12)


def test_fft_face_velocity_equals_dense():
    """The FFT convolution (scalar heads) against the dense weighted kernel sum at the faces."""
    mu0 = circle_density(96, lambda t: 1 + 0.6 * np.cos(t) + 0.2 * np.sin(2 * t))
    for kind in ("usa", "softmax"):
        scalar = MultiHead.scalar([1.3, 0.4], d=2, beta=2.0, kind=kind)
        th = (np.arange(96) + 1.0) * 2 * np.pi / 96
        faces = np.stack([np.cos(th), np.sin(th)], 1)
        v = mf.measure_velocity(scalar, mu0.points, mu0.mass, at=faces)
        tangential = -v[:, 0] * np.sin(th) + v[:, 1] * np.cos(th)
        np.testing.assert_allclose(mf.circle_velocity(scalar, mu0.mass), tangential, atol=1e-13)


@pytest.mark.parametrize("kind", ["usa", "softmax"])
def test_fv_circle_conservation_positivity_energy(kind):
    model = MultiHead.scalar([1.0], d=2, beta=2.0, kind=kind)
    mu0 = circle_density(128, lambda t: 1 + 0.5 * np.cos(t) + 0.3 * np.sin(3 * t))
    res = mf.wasserstein_ascent(mu0, model, t1=3.0, n_saves=13, scheme="fv_circle")
    np.testing.assert_allclose(res.mass.sum(1), 1.0, atol=1e-13)
    assert res.mass.min() >= 0
    if kind == "usa":
        assert np.all(np.diff(res.energy) > 0)  # gradient ascent of E_multi
    assert res.mass[-1].max() > 2 * res.mass[0].max()  # it concentrates


def test_fv_circle_grid_refinement_order():
    model = MultiHead.scalar([1.0], d=2, beta=2.0, kind="usa")
    fn = lambda t: 1 + 0.5 * np.cos(t) + 0.3 * np.sin(3 * t)  # noqa: E731
    finals = {m: mf.wasserstein_ascent(circle_density(m, fn), model, t1=1.0, n_saves=2, scheme="fv_circle").mass[-1]
              for m in (64, 128, 256, 512)}
    # successive differences in W1 after mapping to the common finest grid
    def up(p, m_to):
        return np.repeat(p, m_to // len(p)) / (m_to // len(p))

    errs = [w1_circle(up(finals[m], 512), up(finals[2 * m], 512)) for m in (64, 128)]
    order = np.log2(errs[0] / errs[1])
    assert 0.8 < order < 2.2  # first-order upwind in space and its time step


def test_jko_blurs_a_dirac_with_variance_gamma_over_2():
    m = 1440
    pts, areas = mf.circle_grid(m)
    mass = np.zeros(m)
    mass[0] = 1.0
    model = MultiHead(np.zeros((2, 2)), beta=1.0, kind="usa")  # F = 0: w is constant
    gamma = 4e-3
    res = mf.wasserstein_ascent(mf.GridMeasure(pts, areas, mass), model, t1=0.01, n_saves=2, scheme="jko",
                                dt=0.01, gamma=gamma)
    theta = np.arctan2(pts[:, 1], pts[:, 0]) - np.arctan2(pts[0, 1], pts[0, 0])
    theta = (theta + np.pi) % (2 * np.pi) - np.pi
    var = np.sum(res.mass[-1] * theta**2)
    assert var == pytest.approx(gamma / 2, rel=1e-2)
    assert res.mass[-1].sum() == pytest.approx(1.0, abs=1e-14)


def test_jko_energy_and_agreement_with_fv():
    model = MultiHead.scalar([1.0], d=2, beta=2.0, kind="usa")
    fn = lambda t: 1 + 0.5 * np.cos(t) + 0.3 * np.sin(3 * t)  # noqa: E731
    mu0 = circle_density(512, fn)
    fv = mf.wasserstein_ascent(mu0, model, t1=1.0, n_saves=6, scheme="fv_circle")
    gaps = {}
    for dt in (0.01, 0.05):
        jko = mf.wasserstein_ascent(mu0, model, t1=1.0, n_saves=6, scheme="jko", dt=dt)
        assert np.all(np.diff(jko.energy) > 0)
        np.testing.assert_allclose(jko.mass.sum(1), 1.0, atol=1e-13)
        gaps[dt] = w1_circle(jko.mass[-1], fv.mass[-1])
    # the linearised step is first order in dt (plus the entropic blur γ/(2τ))
    assert gaps[0.01] < 0.02 and gaps[0.01] < 0.5 * gaps[0.05]
    np.testing.assert_allclose(jko.energy[-1], fv.energy[-1], rtol=5e-2)


def test_jko_on_the_two_sphere():
    pts, areas = mf.fibonacci_sphere(400)
    mu0 = mf.GridMeasure.from_density(pts, areas, lambda y: 1 + 0.8 * y[:, 2])
    model = MultiHead(np.diag([1.0, 0.5, 1.5]), beta=1.0, kind="usa")
    res = mf.wasserstein_ascent(mu0, model, t1=0.5, n_saves=3, scheme="jko", dt=0.05)
    np.testing.assert_allclose(res.mass.sum(1), 1.0, atol=1e-13)
    assert res.mass.min() >= 0 and np.all(np.diff(res.energy) > 0)


@pytest.mark.parametrize("kind", ["usa", "softmax"])
@pytest.mark.parametrize("kappa_factor", [0.5, 2.0])
def test_noisy_uniform_state_growth_rate(kind, kappa_factor):
    """Mode-1 amplitude around the uniform state grows/decays at σ_1 = μI_1(a)/(aZ_0) − 1/κ."""
    beta, lam = 2.0, 1.0
    kappa = kappa_factor * mf.critical_kappa(beta, lam=lam, kind=kind)
    sigma = mf.uniform_growth_rate(beta, lam=lam, kind=kind, kappa=kappa)
    model = MultiHead.scalar([lam], d=2, beta=beta, kind=kind)
    mu0 = circle_density(64, lambda t: 1 + 1e-4 * np.cos(t))
    T = 1.5
    res = mf.wasserstein_ascent(mu0, model, t1=T, n_saves=2, scheme="fv_circle", kappa=kappa)
    amp = [abs(np.fft.rfft(p)[1]) for p in res.mass]
    rate = np.log(amp[1] / amp[0]) / T
    assert rate == pytest.approx(sigma, abs=0.02 * abs(sigma) + 2e-3)
    assert (rate > 0) == (kappa_factor > 1)  # clustered for large coupling, uniform stable for small


def test_meanfield_bad_input(rng):
    model = MultiHead(np.eye(2), beta=1.0, kind="softmax")
    pts, areas = mf.circle_grid(16)
    with pytest.raises(ValueError, match="scheme 'jko' is the Wasserstein gradient ascent"):
        mf.wasserstein_ascent(mf.GridMeasure(pts, areas, np.full(16, 1 / 16)), model, t1=1.0, scheme="jko", dt=0.1)
    with pytest.raises(ValueError, match="'scheme' parameter of wasserstein_ascent must be one of"):
        mf.wasserstein_ascent(mf.EmpiricalMeasure(pts), model, t1=1.0, scheme="pseudo_spectral")
    with pytest.raises(ValueError, match="'mass' parameter of GridMeasure must sum to 1"):
        mf.GridMeasure(pts, areas, np.ones(16))
    with pytest.raises(ValueError, match="needs an EmpiricalMeasure"):
        mf.wasserstein_ascent(mf.GridMeasure(pts, areas, np.full(16, 1 / 16)), model, t1=1.0, dt=0.1)
    with pytest.raises(ValueError, match=r"'model' parameter of measure_velocity must have kind in \[[^\]]*'softmax'"
                                         r"[^\]]*\]; got kind='relu'"):
        mf.measure_velocity(MultiHead(np.eye(2), kind="relu"), pts)


def test_first_variation_refuses_a_non_symmetric_score():
    # for M != M^T the first variation of E has two halves, e^{beta<y_k, M y_l>} and e^{beta<y_l, M y_k>}
    M = np.array([[1.0, 0.5], [0.0, 1.0]])
    with pytest.raises(InvalidParameterError, match=r"'model' parameter of first_variation: M must be symmetric.*"
                                                    r"max \|M_h - M_h\^T\| = 0.5"):
        mf.first_variation(MultiHead(M, beta=1.0, kind="usa"), np.eye(2))
    # the symmetric part is accepted, and is the derivative of the energy along mass moves v (sum v = 0)
    S = MultiHead((M + M.T) / 2, beta=1.0, kind="usa")
    y, p, e = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, -1.0]]), np.array([0.2, 0.3, 0.5]), 1e-5
    for v in (np.array([1.0, -1.0, 0.0]), np.array([0.0, 1.0, -1.0])):
        numeric = (mf.measure_energy(S, y, p + e * v) - mf.measure_energy(S, y, p - e * v)) / (2 * e)
        assert mf.first_variation(S, y, p) @ v == pytest.approx(numeric, rel=1e-7)


def sphere_measure(m):
    pts, _ = mf.fibonacci_sphere(m)
    mesh = mf.SphereMesh.from_points(pts)
    return mf.GridMeasure.from_density(pts, mesh.areas, lambda y: 1 + 0.8 * y[:, 2] + 0.3 * y[:, 0]), mesh


def test_sphere_mesh_geometry():
    _, mesh = sphere_measure(300)
    assert mesh.areas.sum() == pytest.approx(4 * np.pi, rel=1e-12)
    assert len(mesh.edges) == 3 * 300 - 6  # Euler: E = 3V − 6 for a triangulated sphere
    np.testing.assert_allclose(np.einsum("ij,ij->i", mesh.normal, mesh.mid), 0.0, atol=1e-12)


@pytest.mark.parametrize("kappa", [np.inf, 2.0])
def test_fv_sphere_conservation_positivity_energy(kappa):
    mu0, _ = sphere_measure(250)
    model = MultiHead(np.diag([1.0, 0.5, 1.5]), beta=1.0, kind="usa")
    res = mf.wasserstein_ascent(mu0, model, t1=1.0, n_saves=3, scheme="fv_sphere", kappa=kappa)
    np.testing.assert_allclose(res.mass.sum(1), 1.0, atol=1e-13)
    assert res.mass.min() >= 0
    if not np.isfinite(kappa):
        assert np.all(np.diff(res.energy) > 0)


@pytest.mark.slow
def test_fv_sphere_refinement():
    model = MultiHead(np.diag([1.0, 0.5, 1.5]), beta=1.0, kind="usa")
    E = [mf.wasserstein_ascent(sphere_measure(m)[0], model, t1=1.0, n_saves=2, scheme="fv_sphere").energy[-1]
         for m in (250, 1000, 2000)]
    # measured here: E = 1.4006, 1.4865, 1.5126: the gap shrinks by ~3.3 for a factor 2 in m
    assert abs(E[2] - E[1]) < 0.6 * abs(E[1] - E[0])


@pytest.mark.parametrize("kind", ["softmax", "usa"])
def test_fv_sphere_fast_summation_matches_exact(kind):
    # the cell velocities at the Voronoi edge midpoints through the NUFFT route: the run equals
    # the exact one to the bound, mass stays exact and positive
    pts, areas = mf.fibonacci_sphere(1500)
    mu0 = mf.GridMeasure.from_density(pts, areas, lambda y: 1.0 + 0.6 * y[:, 2] + 0.3 * y[:, 0] * y[:, 1])
    runs = {}
    for summation in ("exact", "fast"):
        model = MultiHead.scalar([1.0, 0.5], d=3, beta=4.0, kind=kind, summation=summation, tol=1e-11,
                                 log_time_scale="auto")
        runs[summation] = mf.wasserstein_ascent(mu0, model, t1=0.3, n_saves=3, scheme="fv_sphere")
    ex, fa = runs["exact"], runs["fast"]
    assert fa.n_steps == ex.n_steps
    np.testing.assert_allclose(fa.mass, ex.mass, rtol=0, atol=1e-9 * ex.mass.max())
    np.testing.assert_allclose(fa.energy, ex.energy, rtol=1e-9)
    assert fa.info["mass_error"] < 1e-13 and fa.info["min_mass"] >= 0
    # and the mean-field velocity at the edge midpoints did take the fast route
    mesh = mf.SphereMesh.from_points(pts)
    (p, _) = model.sums(mesh.mid, sources=pts, weights=mu0.mass)
    assert p.method == "scalar" and p.bound <= 1e-11


def test_from_density_refuses_a_density_that_integrates_to_zero():
    pts, areas = mf.circle_grid(16)
    with pytest.raises(InvalidParameterError, match="integrates to zero"):
        mf.GridMeasure.from_density(pts, areas, lambda y: np.zeros(len(y)))
    # a density supported between the cell centres is zero on the grid too
    with pytest.raises(InvalidParameterError, match="integrates to zero"):
        mf.GridMeasure.from_density(pts, areas, lambda y: np.where(y[:, 0] > 1.0, 1.0, 0.0))


def test_from_density_areas_must_match_the_points():
    pts, areas = mf.circle_grid(16)
    for bad in (areas[:5], np.append(areas, 1.0), -areas):
        with pytest.raises(InvalidParameterError, match="areas"):
            mf.GridMeasure.from_density(pts, bad, lambda y: 1 + y[:, 0])


def test_from_density_masses_are_density_times_area():
    # p_k ∝ rho(y_k) ω_k, exactly, whatever the scale of rho (up to the float64 maximum)
    pts, _ = mf.fibonacci_sphere(40)
    areas = np.linspace(1.0, 2.0, 40) * 4 * np.pi / np.linspace(1.0, 2.0, 40).sum()
    for scale in (1e-300, 1.0, 1e308):
        mu = mf.GridMeasure.from_density(pts, areas, lambda y, s=scale: (1.5 + y[:, 2]) / 2.5 * s)
        ref = (1.5 + pts[:, 2]) * areas
        np.testing.assert_allclose(mu.mass, ref / ref.sum(), rtol=1e-13)
