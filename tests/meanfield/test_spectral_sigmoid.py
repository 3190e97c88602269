"""Sigmoid attention's spectral mean field (docs/theory.md, "Sigmoid attention"): the Funk–Hecke
coefficients of a zonal kernel by quadrature against the closed form of e^{at}, agreement with the
Lagrangian scheme on many atoms, the softplus energy's rise at the rate of the kinetic term, and the
refusals (Sinkhorn, missing n, heads and geometries the zonal kernel does not serve)."""

import numpy as np
import pytest
from scipy.special import ive

import meanfield as mf
from meanfield._spectral.shared import fh_log, funk_hecke_quadrature, gauss_gegenbauer, gegenbauer_orthonormal
from meanfield._spectral.shared import recurrence as gegenbauer_recurrence
from particles import MultiHead, Sigmoid, Sinkhorn
from particles.validation import InvalidParameterError

TOKENS = 64


def profile(t):
    return 1 + 0.6 * t + 0.3 * t**2


@pytest.mark.parametrize("d", [3, 5, 16, 128])
@pytest.mark.parametrize("a", [0.5, 3.0, -2.0, 10.0, 40.0])
def test_funk_hecke_quadrature_matches_the_closed_form_of_exp(d, a):
    """Gauss–Gegenbauer coefficients of G = e^{at} against Γ(ν+1)(2/a)^ν I_{l+ν}(a), degrees 0..200
    (measured: at most 1.1e-14 of the largest)."""
    L = 200
    sign, log = fh_log(a, np.arange(L + 1), d)
    exact = sign * np.exp(log)
    got = funk_hecke_quadrature(lambda t: np.exp(a * t), L, d)
    assert np.abs(got - exact).max() <= 1e-13 * np.abs(exact).max()


@pytest.mark.parametrize("a", [0.5, 3.0, -2.0, 10.0, 40.0])
def test_circle_coefficients_match_the_bessel_functions(a):
    """d = 2: the Fourier coefficients of e^{a cos ψ} are I_l(a) (measured: at most 1.6e-15 of the largest)."""
    L = 200
    exact = ive(np.arange(L + 1), a) * np.exp(abs(a))
    got = funk_hecke_quadrature(lambda t: np.exp(a * t), L, 2)
    assert np.abs(got - exact).max() <= 1e-14 * np.abs(exact).max()


def test_funk_hecke_quadrature_of_polynomials_and_its_round_off_floor():
    """t^2 on S^2: Ĝ(0) = 1/3, Ĝ(2) = 2/15, nothing else (the quadrature's round-off is cut to 0)."""
    got = funk_hecke_quadrature(lambda t: t * t, 6, 3)
    np.testing.assert_allclose(got, [1 / 3, 0, 2 / 15, 0, 0, 0, 0], atol=1e-16)
    assert np.all(got[3:] == 0)


def _moments(weights, z, K=4):
    """∫ P_k(<x, e>) dμ, k = 0..K (P_k = q_k / q_k(1), Legendre on S^2)."""
    return weights @ (gegenbauer_orthonormal(K, z, 3) / gegenbauer_orthonormal(K, np.ones(1), 3)[0])


def test_spectral_agrees_with_the_lagrangian_scheme_on_many_atoms():
    """S^2, two scalar heads (one repulsive), Sigmoid(tokens=64): the zonal spectral solution against the
    Lagrangian scheme of 512 Gauss–Legendre atoms (masses ρ w_k, each weighed n w_k) by RK4. The moments
    ∫ P_k dμ, k ≤ 4, at t = 1 agree to the RK4 error, which falls as dt^4 (measured: 5.2e-8 at dt = 0.05,
    1.4e-9 at dt = 0.02 with 1152 atoms, 8.8e-11 at dt = 0.01 with 2048 atoms)."""
    model = MultiHead.scalar([1.0, -0.4], d=3, beta=2.0, kind=Sigmoid(tokens=TOKENS))
    res = mf.wasserstein_ascent(mf.ZonalMeasure(lambda x: profile(x[:, -1]), d=3), model, t1=1.0, n_saves=3,
                                scheme="spectral", rtol=1e-12, tol=1e-12)
    c = res.info["solution"].coefficients[-1]
    spectral = c[:5] / gegenbauer_orthonormal(4, np.ones(1), 3)[0]
    pts, w = mf.sphere_quadrature(3, n=16)
    w = w * profile(pts[:, 2])
    w /= w.sum()
    errors = []
    for dt in (0.05, 0.025):
        lag = mf.wasserstein_ascent(mf.EmpiricalMeasure(pts, w), model, t1=1.0, n_saves=3, dt=dt)
        errors.append(np.abs(_moments(w, lag.points[-1][:, 2]) - spectral).max())
    assert errors[0] < 2e-7
    assert errors[0] / errors[1] > 10  # fourth order in dt: the spectral side is exact to far below
    assert np.abs(spectral[1:] - _moments(w, pts[:, 2])[1:]).max() > 1e-2  # the flow moved the moments


def test_circle_spectral_agrees_with_the_lagrangian_scheme():
    """S^1, two scalar heads: the Fourier solution against the Lagrangian scheme of 64 equispaced atoms (masses
    ρ(θ_k)/Σρ, the trapezoidal rule), Fourier moments k ≤ 4 at t = 1 (measured: 7.8e-7 at dt = 0.05, 4.8e-8 at
    dt = 0.025, the same with 128 atoms: RK4's error, fourth order)."""
    model = MultiHead.scalar([1.0, -0.4], d=2, beta=2.0, kind=Sigmoid(tokens=TOKENS))
    shape = lambda th: 1 + 0.5 * np.cos(th) + 0.3 * np.sin(2 * th)  # noqa: E731
    pts, areas = mf.circle_grid(128)
    grid = mf.GridMeasure.from_density(pts, areas, lambda x: shape(np.arctan2(x[:, 1], x[:, 0])))
    res = mf.wasserstein_ascent(grid, model, t1=1.0, n_saves=3, scheme="spectral", rtol=1e-12, tol=1e-12)
    spectral = res.info["solution"].coefficients[-1][:5]
    assert np.all(np.diff(res.energy) > 0)
    atoms, _ = mf.circle_grid(64)
    w = shape(np.arctan2(atoms[:, 1], atoms[:, 0]))
    w /= w.sum()
    errors = []
    for dt in (0.05, 0.025):
        x = mf.wasserstein_ascent(mf.EmpiricalMeasure(atoms, w), model, t1=1.0, n_saves=3, dt=dt).points[-1]
        moments = np.exp(-1j * np.outer(np.arctan2(x[:, 1], x[:, 0]), np.arange(5))).T @ w
        errors.append(np.abs(moments - spectral).max())
    assert errors[0] < 2e-6 and errors[0] / errors[1] > 10


def test_tokens_make_the_lagrangian_scheme_independent_of_the_atom_count():
    """Sigmoid(tokens=n) weighs atom j by n w_j with the bias -log n: n equal atoms are the particles, and
    splitting every atom in two leaves the mean-field velocity unchanged."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((10, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    model = MultiHead.scalar([1.3], d=3, beta=1.5, kind="sigmoid")
    fixed = model.replace(kind=Sigmoid(tokens=10))
    np.testing.assert_allclose(mf.measure_velocity(fixed, x), model.velocity(x), rtol=1e-13)
    doubled = mf.measure_velocity(fixed, np.vstack([x, x]), at=x)
    np.testing.assert_allclose(doubled, model.velocity(x), rtol=1e-13)
    assert fixed.kind == Sigmoid(tokens=10) and "kind_tokens" in fixed.to_attrs()
    assert MultiHead.from_attrs(fixed.to_attrs()).kind == Sigmoid(tokens=10)


@pytest.mark.parametrize("d", [3, 5])
def test_softplus_energy_rises_at_the_rate_of_the_kinetic_term(d):
    """E[μ] = (1/β) Σ_h ∬ softplus(βλ_h<x, y> + b) dμ dμ along the spectral flow of symmetric, value-aligned
    heads: dE/dt = (2/n) ∫|v|² dμ, v = Σ_h λ_h ∇_S ∫ G_h dμ (the particle identity on μ_n). dE/dt by a
    fourth-order difference of the saved energies, the kinetic term by Gauss–Gegenbauer quadrature of
    (1-t²)Φ'(t)²ρ(t) from the Funk–Hecke multipliers."""
    lam, beta = np.array([1.0, 0.5]), 2.5
    kind = Sigmoid(tokens=TOKENS)
    model = MultiHead.scalar(lam, d=d, beta=beta, kind=kind)
    h = 0.01
    ts = 0.3 + h * np.arange(-2, 3)
    res = mf.wasserstein_ascent(mf.ZonalMeasure(lambda x: profile(x[:, -1]), d=d), model, t0=0.0, t1=0.3 + 2 * h,
                                n_saves=int(round((0.3 + 2 * h) / h)) + 1, scheme="spectral", L=64, rtol=1e-13)
    np.testing.assert_allclose(res.t[-5:], ts, atol=1e-12)
    E = res.energy[-5:]
    rate = (E[0] - 8 * E[1] + 8 * E[3] - E[4]) / (12 * h)
    assert np.all(np.diff(res.energy) > 0)
    c = res.info["solution"].coefficients[-3]
    L = len(c) - 1
    phi = sum(m * funk_hecke_quadrature(kind.zonal_kernel(beta * m)[1], L + 1, d) for m in lam)
    t, w = gauss_gegenbauer(2 * L + 8, d)
    Q = gegenbauer_orthonormal(L + 1, t, d)
    a = gegenbauer_recurrence(L + 1, d)
    l = np.arange(L + 2)
    # (1-t²) q_l' = (l+d-2) a_l q_{l-1} - l a_{l+1} q_{l+1}
    up = np.zeros(L + 2)
    up[1:] = (l[1:] + d - 2) * a[: L + 1]
    down = l[: L + 1] * a[: L + 1]
    cp = np.zeros(L + 2)
    cp[: L + 1] = phi[: L + 1] * c
    flux = Q[:, : L + 1] @ (up[1:] * cp[1:]) - Q[:, 1:] @ (down * cp[: L + 1])  # (1-t²)Φ'
    kinetic = np.sum(w * flux**2 / (1 - t * t) * (Q[:, : L + 1] @ c))
    assert rate == pytest.approx(2 / TOKENS * kinetic, rel=1e-6)


def test_softplus_energy_rate_on_the_circle():
    """S^1: dE/dt = (2/n) ∫|v|² dμ with v = ∂_θΦ, Φ = Σ_h λ_h Σ_k Ĝ_h(|k|) c_k e^{ikθ} (Fourier coefficients of
    G_h(cos ψ) by the quadrature), the kinetic term on a fine grid."""
    lam, beta, h = np.array([1.0, 0.5]), 2.5, 0.01
    kind = Sigmoid(tokens=TOKENS)
    model = MultiHead.scalar(lam, d=2, beta=beta, kind=kind)
    pts, areas = mf.circle_grid(128)
    grid = mf.GridMeasure.from_density(pts, areas, lambda x: 1 + 0.5 * x[:, 0] + 0.3 * x[:, 0] * x[:, 1])
    res = mf.wasserstein_ascent(grid, model, t1=0.3 + 2 * h, n_saves=33, scheme="spectral", L=64, rtol=1e-13)
    E = res.energy[-5:]
    rate = (E[0] - 8 * E[1] + 8 * E[3] - E[4]) / (12 * h)
    c = res.info["solution"].coefficients[-3]
    k = np.arange(len(c))
    phi = sum(m * funk_hecke_quadrature(kind.zonal_kernel(beta * m)[1], len(c) - 1, 2) for m in lam) * c
    theta = 2 * np.pi * np.arange(1024) / 1024
    waves = np.exp(1j * np.outer(theta, k)) * np.where(k == 0, 1.0, 2.0)
    v = np.real(waves @ (1j * k * phi))
    rho = np.real(waves @ c)
    assert rate == pytest.approx(2 / TOKENS * np.mean(rho * v * v), rel=1e-6)


def test_sphere_grid_matches_the_zonal_solution():
    """S^2: a GridMeasure of a zonal density (the axial Legendre path) and the ZonalMeasure give one flow."""
    model = MultiHead.scalar([1.0, -0.4], d=3, beta=2.0, kind=Sigmoid(tokens=TOKENS))
    pts, w = mf.sphere_quadrature(3, n=40)
    grid = mf.GridMeasure.from_density(pts, 4 * np.pi * w, lambda x: profile(x[:, 2]))
    rs = mf.wasserstein_ascent(grid, model, t1=0.5, n_saves=3, scheme="spectral", L=32)
    rz = mf.wasserstein_ascent(mf.ZonalMeasure(lambda x: profile(x[:, -1]), d=3), model, t1=0.5, n_saves=3,
                               scheme="spectral", L=32)
    x = pts[::37]
    for k in range(3):
        np.testing.assert_allclose(rs.info["solution"].density(k, x), rz.info["solution"].density(k, x), atol=1e-10)
    np.testing.assert_allclose(rs.energy, rz.energy, rtol=1e-12)


def test_large_n_tends_to_usa():
    """n σ(βs - log n) = e^{βs}/(1 + e^{βs}/n) → e^{βs}: on S^3 the spectral sigmoid flow of n tokens is USA's to
    O(1/n) (measured: 3.4e-5 at n = 10^4, 3.4e-7 at 10^6, 3.4e-9 at 10^8)."""
    mu = mf.ZonalMeasure(lambda x: profile(x[:, -1]), d=4)
    runs = [mf.wasserstein_ascent(mu, MultiHead.scalar([1.0], d=4, beta=1.5, kind=kind), t1=0.5, n_saves=2,
                                  scheme="spectral", L=24) for kind in (Sigmoid(tokens=10**4), Sigmoid(tokens=10**6),
                                                                        "usa")]
    a, b, usa = (r.info["solution"].coefficients[-1] for r in runs)
    gaps = np.abs(a - usa).max(), np.abs(b - usa).max()
    assert gaps[1] < 1e-6 and 90 < gaps[0] / gaps[1] < 110
    assert np.abs(usa - runs[2].info["solution"].coefficients[0]).max() > 1e-2  # the flow moved


def test_refusals_name_the_fix():
    zonal = mf.ZonalMeasure(lambda x: profile(x[:, -1]), d=3)
    scalar = MultiHead.scalar([1.0], d=3, beta=1.0, kind="sigmoid")
    with pytest.raises(InvalidParameterError, match=r"Sigmoid\(tokens=n\)"):
        mf.wasserstein_ascent(zonal, scalar, t1=0.1, scheme="spectral")
    with pytest.raises(InvalidParameterError, match=r"Sigmoid\(tokens=n\)"):
        mf.wasserstein_ascent(zonal, scalar.replace(kind=Sigmoid(bias=-2.0)), t1=0.1, scheme="spectral")
    fixed = scalar.replace(kind=Sigmoid(tokens=TOKENS))
    general = MultiHead(np.diag([1.0, 0.5, 0.2]), beta=1.0, kind=Sigmoid(tokens=TOKENS))
    with pytest.raises(InvalidParameterError, match="scalar heads.*scheme='lagrangian'"):
        mf.wasserstein_ascent(zonal, general, t1=0.1, scheme="spectral")
    pts, areas = mf.circle_grid(32)
    circle = mf.GridMeasure.from_density(pts, areas, lambda x: 1 + 0.3 * x[:, 0])
    rotation = MultiHead(np.array([[0.0, -1.0], [1.0, 0.0]]), beta=1.0, kind=Sigmoid(tokens=8))
    with pytest.raises(InvalidParameterError, match="scalar heads.*scheme='lagrangian'"):
        mf.wasserstein_ascent(circle, rotation, t1=0.1, scheme="spectral")
    with pytest.raises(InvalidParameterError, match="scheme='lagrangian'.*scheme='spectral'"):
        mf.wasserstein_ascent(circle, MultiHead.scalar([1.0], d=2, beta=1.0, kind=Sigmoid(tokens=8)), t1=0.1,
                              scheme="fv_circle")
    # Sinkhorn normalises over rows and columns: no zonal kernel, every grid scheme refuses it with its message
    sinkhorn = MultiHead.scalar([1.0], d=3, beta=1.0, kind=Sinkhorn())
    atoms = mf.EmpiricalMeasure(np.eye(3))
    for mu0, scheme, options in ((zonal, "spectral", {}), (atoms, "fv_sphere", {}), (atoms, "jko", {"dt": 0.1})):
        with pytest.raises(InvalidParameterError, match="Sinkhorn|sinkhorn|scheme='lagrangian'"):
            mf.wasserstein_ascent(mu0, sinkhorn, t1=0.1, scheme=scheme, **options)
    for bad in (0, -3, 2.5, "64", np.nan):
        with pytest.raises(InvalidParameterError, match="tokens"):
            Sigmoid(tokens=bad)
    assert fixed.attention.has_zonal_kernel and not sinkhorn.attention.has_zonal_kernel
