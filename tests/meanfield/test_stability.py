"""Linear stability of the uniform measure on S^{d-1}: Funk–Hecke rates against quadrature,
the exact linear response of the mean-field velocity, the S^1 formula and the S^2 solver."""

import numpy as np
import pytest
from scipy.special import eval_chebyt, eval_gegenbauer, iv

import meanfield as mf
from particles import MultiHead


def funk_hecke_quad(a, l, d):
    """ĝ_a(l) = ∫ e^{a cos θ} P_l^{(d)}(cos θ) sin^{d-2}θ dθ / ∫ sin^{d-2}θ dθ, by 200-node Gauss–Legendre
    in θ (the integrand is analytic)."""
    nu = (d - 2) / 2
    g, w = np.polynomial.legendre.leggauss(200)
    th = (g + 1) * np.pi / 2
    t = np.cos(th)
    P = eval_chebyt(l, t) if d == 2 else eval_gegenbauer(l, nu, t) / eval_gegenbauer(l, nu, 1.0)
    jac = np.sin(th) ** (d - 2)
    return float(np.sum(w * np.exp(a * t) * P * jac) / np.sum(w * jac))


@pytest.mark.parametrize("d", [2, 3, 4, 7])
@pytest.mark.parametrize("a", [-2.0, 0.4, 3.0])
def test_funk_hecke_coefficient_against_quadrature(d, a):
    for l in range(5):
        assert mf.funk_hecke_exp(a, l=l, d=d) == pytest.approx(funk_hecke_quad(a, l, d), rel=1e-9, abs=1e-13)


@pytest.mark.parametrize("kind", ["usa", "softmax"])
@pytest.mark.parametrize("kappa", [np.inf, 1.5])
def test_circle_rates_match_bessel_formula(kind, kappa):
    """d = 2: σ_k = k²(μ I_k(a)/(a Z_0) − 1/κ), Z_0 = 1 (USA) or I_0(a) (softmax)."""
    beta, lam, mu = 1.7, 0.9, 1.2
    a = beta * lam
    Z0 = iv(0, a) if kind == "softmax" else 1.0
    for k in range(1, 5):
        expected = k * k * (mu * iv(k, a) / (a * Z0) - 1 / kappa)
        assert mf.uniform_growth_rate(beta, lam=lam, mu=mu, kind=kind, kappa=kappa, k=k) == \
            pytest.approx(expected, rel=1e-12)
    assert mf.critical_kappa(beta, lam=lam, mu=mu, kind=kind) == pytest.approx(a * Z0 / (mu * iv(1, a)), rel=1e-12)


def harmonics(d):
    """Two harmonics (degree 1 and 2) and their sphere gradients."""
    e = np.eye(d)

    def grad1(x):
        return e[0] - x[:, :1] * x

    def grad2(x):
        return x[:, 1:2] * e[0] + x[:, 0:1] * e[1] - 2 * (x[:, 0] * x[:, 1])[:, None] * x

    return [(1, lambda y: y[:, 0], grad1), (2, lambda y: y[:, 0] * y[:, 1], grad2)]


@pytest.mark.parametrize("d,n_quad", [(2, 64), (3, 24), (4, 10)])
@pytest.mark.parametrize("kind", ["usa", "softmax"])
def test_velocity_linear_response(rng, d, n_quad, kind):
    """v[σ + εY_l] = ε Σ_h μ_h G_h(l) ∇_S Y_l: exact for USA (v is linear in μ), O(ε²) for softmax."""
    pts, w = mf.sphere_quadrature(d, n=n_quad)
    q = rng.standard_normal((6, d))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    model = MultiHead.scalar([1.3, -0.4], d=d, beta=1.5, kind=kind)
    model = MultiHead(model.M, model.W * np.array([1.0, 2.0])[:, None, None], beta=1.5, kind=kind)  # μ ≠ λ
    rates = mf.growth_rates(model, l_max=2)
    for l, Y, grad in harmonics(d):
        eps = 0.5 if kind == "usa" else 1e-5
        weights = w * (1 + eps * Y(pts))
        v = mf.measure_velocity(model, pts, weights / weights.sum(), at=q)
        predicted = eps * rates[l] / (l * (l + d - 2)) * grad(q)
        tol = 1e-11 if kind == "usa" else 1e-4
        assert np.abs(v - predicted).max() <= tol * np.abs(predicted).max(), (l, d)


@pytest.mark.parametrize("kind,kappa,l,rtol", [("usa", np.inf, 1, 0.02), ("usa", np.inf, 2, 0.02),
                                               ("softmax", np.inf, 2, 0.02), ("usa", 4.0, 1, 0.01)])
def test_fv_sphere_growth_of_one_harmonic(kind, kappa, l, rtol):
    """The S^2 finite-volume solver grows a single harmonic at the Funk–Hecke rate σ_l."""
    Y = (lambda y: y[:, 2]) if l == 1 else (lambda y: 1.5 * y[:, 2] ** 2 - 0.5)
    model = MultiHead.scalar([1.0], d=3, beta=1.5, kind=kind)
    t, amp, rate = mf.harmonic_growth(model, Y, m=300, t1=0.3, n_saves=4, kappa=kappa, scheme="fv_sphere")
    assert np.all(amp > 0)
    assert rate == pytest.approx(mf.growth_rates(model, l_max=l, kappa=kappa)[l], rel=rtol)


@pytest.mark.parametrize("factor", [0.7, 1.4])
def test_critical_kappa_on_the_two_sphere(factor):
    """Below κ* the degree-1 harmonic decays, above it grows (finite volumes on S^2)."""
    beta = 1.5
    kstar = mf.critical_kappa(beta, lam=1.0, kind="softmax", d=3)
    model = MultiHead.scalar([1.0], d=3, beta=beta, kind="softmax")
    assert mf.growth_rates(model, l_max=1, kappa=kstar)[1] == pytest.approx(0.0, abs=1e-12)
    _, amp, _ = mf.harmonic_growth(model, lambda y: y[:, 2], m=200, t1=0.3, n_saves=2, kappa=factor * kstar)
    assert (amp[1] > amp[0]) == (factor > 1)


def test_small_coupling_limit_and_degree_order():
    # a → 0: G(1) → 1/d, so σ_1 = l(l + d − 2) G(1) → (d − 1)/d
    for d in (2, 3, 5):
        assert mf.uniform_growth_rate(1e-9, lam=1.0, k=1, d=d) == pytest.approx((d - 1) / d, rel=1e-8)
    model = MultiHead.scalar([2.0], d=5, beta=1.0, kind="softmax")
    G = mf.growth_rates(model, l_max=6)[1:] / np.array([l * (l + 3) for l in range(1, 7)])
    assert np.all(np.diff(G) < 0)  # mode 1 destabilises first
    assert mf.critical_kappa(1.0, lam=2.0, kind="softmax", d=5) == pytest.approx(1 / G[0], rel=1e-12)
    # λ = μ = −1: μ G(l) = (−1)^l ĝ_1(l), the even degrees destabilise, first l = 2
    assert mf.critical_kappa(1.0, lam=-1.0, d=3) == pytest.approx(1 / mf.funk_hecke_exp(1.0, l=2, d=3), rel=1e-12)
    assert mf.critical_kappa(1.0, lam=1.0, mu=-1.0, d=3) == np.inf  # repulsive values: never unstable


def test_log_time_scale_rescales_the_drift_only():
    plain = MultiHead.scalar([1.0], d=3, beta=3.0)
    scaled = MultiHead.scalar([1.0], d=3, beta=3.0, log_time_scale="auto")
    np.testing.assert_allclose(mf.growth_rates(scaled, l_max=3),
                               mf.growth_rates(plain, l_max=3) * np.exp(-3.0), rtol=1e-12)


def test_bad_input():
    with pytest.raises(ValueError, match="must have scalar heads M_h = lambda_h I"):
        mf.growth_rates(MultiHead(np.diag([1.0, 2.0, 3.0]), beta=1.0))
    with pytest.raises(ValueError, match="'model' parameter of growth_rates must have kind in"):
        mf.growth_rates(MultiHead.scalar([1.0], d=3, kind="relu"))
    with pytest.raises(ValueError, match="'mu' parameter of uniform_growth_rate: must have one strength per head"):
        mf.uniform_growth_rate(1.0, lam=[1.0, 2.0], mu=[1.0], d=3)
    with pytest.raises(ValueError, match="'d' parameter of uniform_growth_rate must be an integer"):
        mf.uniform_growth_rate(1.0, lam=1.0, d=1)
    with pytest.raises(ValueError, match=r"'d' parameter of sphere_quadrature must be an integer in \[2, 4\]"):
        mf.sphere_quadrature(5, n=4)
    with pytest.raises(ValueError, match="must have d = 3 \\(harmonic_growth runs on S\\^2\\)"):
        mf.harmonic_growth(MultiHead.scalar([1.0], d=2), lambda y: y[:, 0], m=50, t1=0.1)
    with pytest.raises(ValueError, match="harmonic_fn of harmonic_growth must return finite values of shape"):
        mf.harmonic_growth(MultiHead.scalar([1.0], d=3), lambda y: y, m=50, t1=0.1)


@pytest.mark.parametrize("d", [2, 3, 5])
@pytest.mark.parametrize("kind", ["usa", "softmax"])
@pytest.mark.parametrize("beta", [1e-5, 1e-12, 1e-100, 1e-300, 5e-324])
def test_small_beta_limit_without_warnings(beta, kind, d):
    """As a -> 0, G(1) = (1/d)(1 + O(a^2)) and G(2) = a/(d(d+2)) (1 + O(a^2)) (ĝ_a(l) ~ Γ(ν+1)(a/2)^l/Γ(l+ν+1)),
    for USA and softmax alike: κ* -> d, σ_1 -> (d-1)/d, σ_2 = 2d G(2), with no RuntimeWarning from the
    underflowing Bessel functions (pytest turns warnings into errors) down to the smallest subnormal."""
    rel = 1e-12 + 10 * beta**2
    assert mf.critical_kappa(beta, lam=1.0, kind=kind, d=d) == pytest.approx(d, rel=rel)
    assert mf.uniform_growth_rate(beta, lam=1.0, kind=kind, d=d) == pytest.approx((d - 1) / d, rel=rel)
    sigma2 = 2 * d * beta / (d * (d + 2))
    assert mf.uniform_growth_rate(beta, lam=1.0, kind=kind, d=d, k=2) == pytest.approx(sigma2, rel=rel, abs=1e-320)


def test_bessel_log_series_matches_ive_where_both_are_representable():
    from scipy.special import ive

    from meanfield.stability import _log_ive

    for v, b in [(64.5, 1e-3), (30.0, 0.5), (200.0, 50.0), (150.0, 3.0)]:
        assert ive(v, b) < 1e-50  # the tail where the series takes over below 1e-290
        assert _log_ive(v, b) == pytest.approx(np.log(ive(v, b)), rel=1e-13)
    # past the float64 range of ive: the uniform (Debye) expansion of I_v(vz), error O(1/v) in the log
    for v, b in [(1000.0, 300.0), (3000.0, 1000.0), (2000.0, 1e-3)]:
        z = b / v
        root = np.sqrt(1 + z * z)
        debye = -0.5 * np.log(2 * np.pi * v) + v * (root + np.log(z / (1 + root))) - 0.25 * np.log(1 + z * z) - b
        assert ive(v, b) == 0.0 and abs(_log_ive(v, b) - debye) < 1.0 / v
