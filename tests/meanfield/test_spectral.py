"""The spectral mean-field scheme: linear growth against Funk–Hecke rates, mass, self-convergence,
agreement with the finite-volume and Lagrangian schemes, the tail control and bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import eval_gegenbauer

import meanfield as mf
import particles
from particles import MultiHead
from particles.validation import ConvergenceWarning, SolverError


@settings(max_examples=25, deadline=None, derandomize=True)
@given(L=st.integers(1, 14), extra=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_sphere_harmonic_transform_round_trip_and_parseval(L, extra, seed):
    """Any band-limited field: analysis inverts synthesis, the Gauss quadrature of f² is the
    coefficient norm (Parseval in L²(σ)), and ∫ f z dσ = C_10 / √3 (P̄_10 = √3 z)."""
    rng = np.random.default_rng(seed)
    sht = mf.sphere_harmonic_transform(L, L + extra)
    C = np.tril(rng.standard_normal((L + 1, L + 1)) + 1j * rng.standard_normal((L + 1, L + 1)))
    C[:, 0] = C[:, 0].real
    f = sht.synthesis(C)
    np.testing.assert_allclose(sht.analysis(f), C, atol=1e-12 * max(1, L))
    weights = np.where(np.arange(L + 1)[None, :] == 0, 1.0, 2.0) * np.tri(L + 1)
    quad = np.repeat(sht.w, sht.nlon) / sht.nlon @ (f.ravel() ** 2)
    assert quad == pytest.approx(np.sum(weights * np.abs(C) ** 2), rel=1e-12)
    z = sht.points[:, 2]
    assert np.repeat(sht.w, sht.nlon) / sht.nlon @ (f.ravel() * z) == pytest.approx(C[1, 0].real / np.sqrt(3),
                                                                                   abs=1e-12 * L)


def circle_measure(fn, m=64):
    pts, areas = mf.circle_grid(m)
    return mf.GridMeasure.from_density(pts, areas, lambda x: fn(np.arctan2(x[:, 1], x[:, 0])))


def sphere_measure(fn, n=16):
    pts, w = mf.sphere_quadrature(3, n=n)
    return mf.GridMeasure.from_density(pts, 4 * np.pi * w, fn)


def coefficients(res):
    return res.info["solution"].coefficients


def symmetric_rates(run, eps, pick, t1):
    """Rates of the modes picked from the coefficients, from the half difference of the ±ε runs
    (cancels every even order in ε: the O(ε²) mode coupling)."""
    plus, minus = (np.array([pick(c) for c in coefficients(run(s * eps))]) for s in (1.0, -1.0))
    amp = (plus - minus) / 2
    return np.log(np.abs(amp[-1]) / np.abs(amp[0])) / t1


def multihead(d, kind, beta=2.5):
    """Two scalar heads, one repulsive value, mu != lambda."""
    M = np.array([1.0, 0.6])[:, None, None] * np.eye(d)
    W = np.array([1.2, -0.4])[:, None, None] * np.eye(d)
    return MultiHead(M, W, beta=beta, kind=kind)


@pytest.mark.parametrize("kind", ["usa", "softmax"])
@pytest.mark.parametrize("kappa", [np.inf, 4.0])
def test_circle_growth_of_modes_1_to_8(kind, kappa):
    model = multihead(2, kind)
    k = np.arange(1, 9)
    t1 = 0.2

    def run(e):
        mu0 = circle_measure(lambda th: 1 + e * np.cos(np.outer(th, k) + 0.3 * k).sum(1))
        return mf.wasserstein_ascent(mu0, model, t1=t1, n_saves=2, scheme="spectral", L=32, kappa=kappa, rtol=1e-13)

    rates = symmetric_rates(run, 1e-5, lambda c: c[1:9], t1)
    np.testing.assert_allclose(rates, mf.growth_rates(model, l_max=8, kappa=kappa)[1:], rtol=1e-6)


def test_circle_rotation_heads_rotate_and_grow():
    """M = λR(α), W = μR(γ): e^{inθ} is still an eigenmode of the linearised flow, with the complex
    rate -i n k̂_n from the Fourier coefficients k̂_n of e^{a cos(δ-α)} sin(γ-δ) (Bessel functions)."""
    from scipy.special import iv

    lam, alpha, mu, gamma, beta = 1.0, 0.4, 0.8, -0.3, 1.5
    R = lambda t: np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])  # noqa: E731
    model = MultiHead(lam * R(alpha)[None], mu * R(gamma)[None], beta=beta, kind="usa")
    n, t1, a = 3, 0.3, beta * lam
    # v = μ k * ρ with k̂_j = (e^{iγ} I_{j+1} e^{-i(j+1)α} - e^{-iγ} I_{j-1} e^{-i(j-1)α}) / (2i); at
    # ρ = 1 + ε(c_n e^{inθ} + c.c.) the uniform part drifts at v_0 = μ k̂_0 (a rotation head turns the
    # uniform measure), so d c_n/dt = -i n μ (k̂_0 + k̂_n) c_n
    def khat(j):
        return (np.exp(1j * gamma) * iv(j + 1, a) * np.exp(-1j * (j + 1) * alpha)
                - np.exp(-1j * gamma) * iv(j - 1, a) * np.exp(-1j * (j - 1) * alpha)) / 2j

    expected = -1j * n * mu * (khat(0) + khat(n))

    def run(e):
        return mf.wasserstein_ascent(circle_measure(lambda th: 1 + e * np.cos(n * th)), model, t1=t1, n_saves=2,
                                     scheme="spectral", L=16, rtol=1e-13)

    plus, minus = (np.array([c[n] for c in coefficients(run(s * 1e-5))]) for s in (1.0, -1.0))
    amp = (plus - minus) / 2
    assert np.log(amp[-1] / amp[0]) / t1 == pytest.approx(expected, rel=1e-7)


def sectoral(l):
    """Re (x + iy)^l: a degree-l harmonic (pure Y_ll)."""
    return lambda p: np.real((p[:, 0] + 1j * p[:, 1]) ** l)


@pytest.mark.parametrize("kind", ["usa", "softmax"])
@pytest.mark.parametrize("kappa", [np.inf, 6.0])
def test_sphere_growth_of_degrees_1_to_8(kind, kappa):
    model = multihead(3, kind)
    t1 = 0.15
    # normalise Re(x+iy)^l to unit sup so every degree starts at a comparable amplitude
    scales = [np.abs(sectoral(l)(mf.sphere_quadrature(3, n=40)[0])).max() for l in range(1, 9)]

    def run(e):
        fn = lambda p: 1 + e * sum(sectoral(l)(p) / s for l, s in zip(range(1, 9), scales))  # noqa: E731
        return mf.wasserstein_ascent(sphere_measure(fn, 14), model, t1=t1, n_saves=2, scheme="spectral", L=13,
                                     kappa=kappa, rtol=1e-13)

    rates = symmetric_rates(run, 1e-5, lambda c: np.array([c[l, l] for l in range(1, 9)]), t1)
    np.testing.assert_allclose(rates, mf.growth_rates(model, l_max=8, kappa=kappa)[1:], rtol=1e-6)


def test_harmonic_growth_uses_the_spectral_solver():
    model = MultiHead.scalar([1.0, 0.5], d=3, beta=2.0, kind="softmax")
    Y = lambda y: 1.5 * y[:, 2] ** 2 - 0.5  # noqa: E731
    t, amp, rate = mf.harmonic_growth(model, Y, m=300, t1=0.3, n_saves=4, kappa=5.0)
    assert rate == pytest.approx(mf.growth_rates(model, l_max=2, kappa=5.0)[2], rel=1e-6)


@pytest.mark.parametrize("d,l_max", [(4, 8), (8, 8), (32, 8), (1024, 4)])
def test_zonal_growth_of_degrees_1_to_8(d, l_max):
    """At d = 1024 a unit-norm degree-l harmonic peaks at sqrt(dim H_l) ~ d^{l/2} / sqrt(l!): the
    perturbation stays a density only for small ε, so the round-off-limited check stops at l = 4."""
    nu = (d - 2) / 2
    model = multihead(d, "softmax", beta=8.0 if d < 1024 else 60.0)
    kappa = 40.0 if d < 1024 else 400.0
    t1 = 0.1 if d < 1024 else 0.02
    P = [lambda x, l=l: eval_gegenbauer(l, nu, x[:, -1]) / eval_gegenbauer(l, nu, 1.0) for l in range(1, l_max + 1)]
    # P_l has sup 1 but σ-norm ~ dim^{-1/2}: give every degree an O(1e-5) coefficient
    t, w = np.polynomial.legendre.leggauss(200)
    jac = (1 - t * t) ** ((d - 3) / 2)
    norms = [np.sqrt(np.sum(w * jac * (eval_gegenbauer(l, nu, t) / eval_gegenbauer(l, nu, 1.0)) ** 2)
                     / np.sum(w * jac)) for l in range(1, l_max + 1)]
    eps = min(1e-5, 0.5 * min(norms))  # sup |P_l / norm_l| = 1 / norm_l

    def run(e):
        fn = lambda x: 1 + e * sum(p(x) / nrm for p, nrm in zip(P, norms)) / l_max  # noqa: E731
        return mf.wasserstein_ascent(mf.ZonalMeasure(fn, d=d), model, t1=t1, n_saves=2, scheme="spectral", L=16,
                                     kappa=kappa, rtol=1e-13)

    rates = symmetric_rates(run, eps, lambda c: c[1:l_max + 1], t1)
    np.testing.assert_allclose(rates, mf.growth_rates(model, l_max=l_max, kappa=kappa)[1:], rtol=1e-6)


def test_mass_is_exact_and_energy_is_the_funk_hecke_sum():
    model = MultiHead.scalar([1.0, 0.5], d=2, beta=1.5, kind="usa")
    mu0 = circle_measure(lambda th: np.exp(np.cos(th) + 0.5 * np.sin(2 * th)))
    # the flow clusters (the spectrum widens): the energy identity holds at any tail
    res = mf.wasserstein_ascent(mu0, model, t1=0.5, n_saves=4, scheme="spectral", L=48, tol=1e-3)
    assert np.all(np.array([c[0] for c in coefficients(res)]) == 1.0)  # the degree-0 coefficient never moves
    assert res.info["mass_error"] < 1e-14
    # energy from the output grid (trapezoid rule: exact for the band-limited density's kernel sums)
    E_grid = [mf.measure_energy(model, res.points, np.maximum(m, 0) / np.maximum(m, 0).sum()) for m in res.mass]
    np.testing.assert_allclose(res.energy, E_grid, rtol=1e-10)
    assert np.all(np.diff(res.energy) > 0)  # USA scalar heads: the flow is the gradient ascent of E


def test_zonal_d3_matches_the_sphere_solver():
    model = MultiHead.scalar([1.0, 0.5], d=3, beta=3.0, kind="softmax")
    fn = lambda x: np.exp(1.5 * x[:, 2])  # noqa: E731
    rs = mf.wasserstein_ascent(sphere_measure(fn, 40), model, t1=1.0, n_saves=3, scheme="spectral", L=32, kappa=10.0)
    rz = mf.wasserstein_ascent(mf.ZonalMeasure(fn, d=3), model, t1=1.0, n_saves=3, scheme="spectral", L=32,
                               kappa=10.0)
    x = particles.sample_uniform(200, d=3, rng=0)
    for k in range(3):
        np.testing.assert_allclose(rs.info["solution"].density(k, x), rz.info["solution"].density(k, x), atol=1e-10)
    np.testing.assert_allclose(rs.energy, rz.energy, rtol=1e-12)


def test_general_heads_on_the_sphere_match_scalar_heads_written_as_matrices():
    """The summation-layer route (any 3 x 3 heads) against the Funk–Hecke route, same heads."""
    scalar = MultiHead.scalar([1.0, 0.5], d=3, beta=2.0, kind="softmax", summation="exact")
    fn = lambda x: np.exp(x[:, 2] + 0.5 * x[:, 0] * x[:, 1])  # noqa: E731
    mu0 = sphere_measure(fn, 20)
    r1 = mf.wasserstein_ascent(mu0, scalar, t1=0.01, n_saves=2, scheme="spectral", L=19, tol=1e-6)
    from meanfield._spectral.sphere import Sphere

    disc = Sphere(scalar, 19)
    disc.scalar = False  # force the general route on the same heads
    c = coefficients(r1)[0]
    np.testing.assert_allclose(disc.rhs(c), Sphere(scalar, 19).rhs(c), atol=1e-12)


def general_heads():
    rng = np.random.default_rng(3)
    return MultiHead(rng.standard_normal((2, 3, 3)) * 0.5, beta=1.0, kind="softmax", summation="exact")


def test_general_heads_on_the_sphere_conserve_mass_and_refine():
    mu0 = sphere_measure(lambda x: np.exp(0.5 * x[:, 0]), 17)
    res = mf.wasserstein_ascent(mu0, general_heads(), t1=0.1, n_saves=2, scheme="spectral", tol=1e-6, rtol=1e-8)
    assert res.info["mass_error"] < 1e-13
    assert np.all(res.info["tail"] <= 1e-6) and res.info["L"] >= 16


@pytest.mark.slow
def test_fv_sphere_converges_to_the_spectral_solution_general_heads():
    """Non-scalar heads: the first moment of fv_sphere approaches the spectral one as the mesh refines."""
    model = general_heads()
    fn = lambda x: np.exp(0.5 * x[:, 0])  # noqa: E731
    res = mf.wasserstein_ascent(sphere_measure(fn, 17), model, t1=0.3, n_saves=2, scheme="spectral", tol=1e-8)
    m_sp = res.mass[-1] @ res.points
    errs = []
    for m in (150, 600):
        pts, areas = mf.fibonacci_sphere(m)
        fv = mf.wasserstein_ascent(mf.GridMeasure.from_density(pts, areas, fn), model, t1=0.3, n_saves=2,
                                   scheme="fv_sphere")
        errs.append(np.linalg.norm(fv.mass[-1] @ pts - m_sp))
    assert errs[1] < 0.6 * errs[0]


def test_self_convergence_noisy_sphere_flow():
    """Two softmax heads, κ finite, t = 1: band limits L and 2L agree to 1e-10 in every coefficient."""
    model = multihead(3, "softmax", beta=2.0)
    fn = lambda x: np.exp(0.8 * x[:, 2] + 0.4 * x[:, 0] * x[:, 1])  # noqa: E731
    mu0 = sphere_measure(fn, 33)
    runs = [mf.wasserstein_ascent(mu0, model, t1=1.0, n_saves=2, scheme="spectral", L=L, kappa=8.0, rtol=1e-13,
                                  tol=1e-8) for L in (16, 32)]
    a, b = coefficients(runs[0])[-1], coefficients(runs[1])[-1]
    assert np.abs(a - b[:17, :17]).max() <= 1e-10
    assert np.abs(b[17:]).max() <= 1e-10


def test_self_convergence_noiseless_circle_flow():
    model = multihead(2, "usa", beta=1.0)
    mu0 = circle_measure(lambda th: np.exp(0.3 * np.cos(th) + 0.2 * np.sin(3 * th)), 256)
    runs = [mf.wasserstein_ascent(mu0, model, t1=1.0, n_saves=2, scheme="spectral", L=L, rtol=1e-13, tol=1e-6)
            for L in (32, 64)]
    a, b = coefficients(runs[0])[-1], coefficients(runs[1])[-1]
    assert np.abs(a - b[:33]).max() <= 1e-10


def test_fv_circle_converges_to_the_spectral_solution():
    model = MultiHead.scalar([1.0, 0.5], d=2, beta=2.0, kind="softmax")
    fn = lambda th: np.exp(0.7 * np.cos(th))  # noqa: E731
    ref = mf.wasserstein_ascent(circle_measure(fn, 64), model, t1=1.0, n_saves=2, scheme="spectral", L=32,
                                kappa=5.0)
    errs = []
    for m in (64, 128, 256):
        fv = mf.wasserstein_ascent(circle_measure(fn, m), model, t1=1.0, n_saves=2, scheme="fv_circle", kappa=5.0)
        pts, areas = mf.circle_grid(m)
        exact = ref.info["solution"].density(1, pts) / (2 * np.pi)
        errs.append(np.abs(fv.mass[-1] / areas - exact).max())
    # first-order upwind: the error halves with the cell size, and the spectral run is the limit
    assert errs[0] / errs[1] > 1.7 and errs[1] / errs[2] > 1.7


def test_fv_sphere_converges_to_the_spectral_solution():
    """Scalar heads, no noise: the first two moments of fv_sphere approach the spectral ones at the
    rate of its two-point fluxes (first order in the cell size h ~ m^{-1/2})."""
    model = MultiHead.scalar([1.0, 0.5], d=3, beta=2.0, kind="softmax")
    fn = lambda x: np.exp(x[:, 2])  # noqa: E731
    ref = mf.wasserstein_ascent(sphere_measure(fn, 25), model, t1=0.5, n_saves=2, scheme="spectral", L=24,
                                tol=1e-8)

    def moments(points, w):
        return np.concatenate([w @ points, np.einsum("k,ki,kj->ij", w, points, points).ravel()])

    exact = moments(ref.points, ref.mass[-1])
    errs = []
    for m in (200, 800):
        pts, areas = mf.fibonacci_sphere(m)
        fv = mf.wasserstein_ascent(mf.GridMeasure.from_density(pts, areas, fn), model, t1=0.5, n_saves=2,
                                   scheme="fv_sphere")
        errs.append(np.abs(moments(pts, fv.mass[-1]) - exact).max())
    assert errs[1] < 0.6 * errs[0] and errs[0] < 0.05


def test_self_convergence_noiseless_usa_sphere_flow_before_clustering():
    model = MultiHead.scalar([1.0, 0.5], d=3, beta=1.0, kind="usa")
    mu0 = sphere_measure(lambda x: np.exp(0.5 * x[:, 2] + 0.3 * x[:, 0] * x[:, 1]), 49)
    runs = [mf.wasserstein_ascent(mu0, model, t1=0.5, n_saves=2, scheme="spectral", L=L, rtol=1e-13, tol=1e-6)
            for L in (24, 48)]
    a, b = coefficients(runs[0])[-1], coefficients(runs[1])[-1]
    assert np.abs(a - b[:25, :25]).max() <= 1e-10


def test_zonal_d8_matches_lagrangian_particles():
    """Noiseless zonal flow on S^7: the mean of <x, e> of particles sampled from ρ0 against the zonal
    solution, to the Monte Carlo error of the change over time."""
    d, n = 8, 2000
    model = MultiHead.scalar([1.0], d=d, beta=4.0, kind="softmax")
    fn = lambda x: np.exp(2.0 * x[:, -1])  # noqa: E731
    zonal = mf.wasserstein_ascent(mf.ZonalMeasure(fn, d=d), model, t1=1.0, n_saves=2, scheme="spectral")
    rng = np.random.default_rng(0)
    x = particles.sample_uniform(40 * n, d=d, rng=rng)
    keep = rng.random(len(x)) < fn(x) / np.exp(2.0)  # rejection sampling from ρ0
    x = x[keep][:n]
    lag = mf.wasserstein_ascent(mf.EmpiricalMeasure(x), model, t1=1.0, n_saves=2, dt=0.05)
    t_zonal = zonal.mass @ zonal.points[:, -1]
    t_lag = np.array([xs[:, -1].mean() for xs in lag.points])
    se = x[:, -1].std() / np.sqrt(n)
    assert abs((t_lag[1] - t_lag[0]) - (t_zonal[1] - t_zonal[0])) < 4 * se
    assert t_zonal[1] - t_zonal[0] > 10 * se  # the test can fail: the change is well resolved


def test_tail_refusal_and_refinement():
    model = MultiHead.scalar([1.0], d=2, beta=6.0, kind="softmax")  # clusters: the density sharpens
    mu0 = circle_measure(lambda th: 1 + 0.5 * np.cos(th), 64)
    with pytest.raises(SolverError, match=r"at t=.* spectral tail .* Rerun with L >= \d+"):
        mf.wasserstein_ascent(mu0, model, t1=3.0, n_saves=4, scheme="spectral", L=12, tol=1e-8)
    res = mf.wasserstein_ascent(mu0, model, t1=3.0, n_saves=4, scheme="spectral", tol=1e-8)
    assert res.info["L"] > 12 and np.all(res.info["tail"] <= 1e-8)
    assert res.info["mass_error"] < 1e-13
    with pytest.raises(SolverError, match=r"above the cap max_L=16: it is concentrating into clusters"):
        mf.wasserstein_ascent(mu0, model, t1=3.0, n_saves=4, scheme="spectral", tol=1e-8, max_L=16)


def test_symmetric_spectrum_cannot_hide_its_tail():
    """1 + cos(6θ)/2 has energy at multiples of 6 only: at L = 8 the top quarter (degrees 7, 8) is
    empty, yet the flow needs degree 12 at once. The tail band widens to the symmetry: refused with
    a fixed L, refined with L=None (and then the solution stays positive)."""
    model = MultiHead.scalar([1.0, 0.5], d=2, beta=16.0, kind="usa", log_time_scale="auto")
    mu0 = circle_measure(lambda th: 1 + 0.5 * np.cos(6 * th), 128)
    with pytest.raises(ValueError, match="L=8 is too small for the initial density"):
        mf.wasserstein_ascent(mu0, model, t1=1.0, scheme="spectral", L=8)
    res = mf.wasserstein_ascent(mu0, model, t1=2.0, n_saves=3, scheme="spectral")
    assert res.info["L"] >= 24 and np.all(res.info["tail"] <= 1e-10) and res.info["min_density"].min() > 0
    # every coefficient off the multiples of 6 stays at round-off: the symmetry is kept
    c = coefficients(res)[-1]
    assert np.abs(np.delete(c, np.arange(0, len(c), 6))).max() < 1e-13


def test_negative_density_is_reported():
    """A density that nearly vanishes, truncated at a small band limit with a loose tail tolerance:
    the Gibbs undershoot is negative beyond round-off and is reported, not hidden."""
    model = MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax")
    mu0 = circle_measure(lambda th: np.exp(20 * np.cos(th)), 256)
    with pytest.warns(ConvergenceWarning, match="negative beyond round-off"):
        res = mf.wasserstein_ascent(mu0, model, t1=0.01, n_saves=2, scheme="spectral", L=24, tol=1e-2)
    assert res.info["min_density"][0] < -1e-10 and 0.0 in res.info["negative_times"]
    # the same density resolved: no warning (pytest turns warnings into errors)
    res = mf.wasserstein_ascent(mu0, model, t1=0.01, n_saves=2, scheme="spectral", L=96)
    assert res.info["min_density"].min() > -1e-13 and len(res.info["negative_times"]) == 0


def test_bad_input():
    model2 = MultiHead.scalar([1.0], d=2, beta=1.0, kind="softmax")
    with pytest.raises(ValueError, match="L=4 is too small for the initial density"):
        mf.wasserstein_ascent(circle_measure(lambda th: np.exp(6 * np.cos(th))), model2, t1=0.1, scheme="spectral",
                              L=4)
    with pytest.raises(ValueError, match="is not zonal about the axis"):
        mf.ZonalMeasure(lambda x: 2 + x[:, 0] * x[:, 1], d=5)
    with pytest.raises(ValueError, match="needs zonal data: pass a meanfield.ZonalMeasure"):
        pts, w = mf.sphere_quadrature(4, n=4)
        mf.wasserstein_ascent(mf.GridMeasure(pts, w, w), MultiHead.scalar([1.0], d=4), t1=0.1, scheme="spectral")
    with pytest.raises(ValueError, match="needs heads that are scaled rotations"):
        mf.wasserstein_ascent(circle_measure(lambda th: 1 + 0 * th), MultiHead(np.diag([1.0, 2.0])), t1=0.1,
                              scheme="spectral")
    with pytest.raises(ValueError, match="ZonalMeasure needs scalar heads"):
        mf.wasserstein_ascent(mf.ZonalMeasure(lambda x: 1 + x[:, -1], d=4), MultiHead(np.diag([1.0, 2, 3, 4])),
                              t1=0.1, scheme="spectral")
    with pytest.raises(ValueError, match=r"'model' parameter of wasserstein_ascent must have kind in \[[^\]]*'softmax'"
                                         r"[^\]]*\]; got kind='relu'"):
        mf.wasserstein_ascent(circle_measure(lambda th: 1 + 0 * th), MultiHead.scalar([1.0], d=2, kind="relu"),
                              t1=0.1, scheme="spectral")
    with pytest.raises(ValueError, match="needs a GridMeasure on the Gauss-Legendre grid"):
        pts, areas = mf.fibonacci_sphere(50)
        mf.wasserstein_ascent(mf.GridMeasure(pts, areas, areas / areas.sum()), MultiHead.scalar([1.0], d=3),
                              t1=0.1, scheme="spectral")
    with pytest.raises(ValueError, match="takes the options"):
        mf.wasserstein_ascent(circle_measure(lambda th: 1 + 0 * th), model2, t1=0.1, scheme="spectral", dt=0.1)
    with pytest.raises(ValueError, match="'L' parameter"):
        mf.wasserstein_ascent(circle_measure(lambda th: 1 + 0 * th), model2, t1=0.1, scheme="spectral", L=1)
