"""Issue 38 on S^2: the spherical-harmonic solver's flux in weak form, <F, grad Y_lm> on the exact grid.

The identity it rests on, the weak form against the strong form where both are exact, the round-off
floor of the right-hand side at large L (one factor l, not l(l+1)), the high degrees of the issue's
example at t = 1 at every band limit, the never-worse property for zonal and non-zonal starts, and the
reach of t = 1.5 within the cap."""

import numpy as np
import pytest

import meanfield as mf
from meanfield._spectral.legendre import legendre_column
from meanfield._spectral.shared import potential_multipliers
from meanfield._spectral.sphere import Sphere, _gradient_weights
from particles import MultiHead


def grid_measure(fn, n=40):
    pts, w = mf.sphere_quadrature(3, n=n)
    return mf.GridMeasure.from_density(pts, 4 * np.pi * w, fn)


def usa():
    """The issue's heads: one USA head, beta = 2."""
    return MultiHead.scalar([1.0], d=3, beta=2.0, kind="usa")


def zonal_start():
    return grid_measure(lambda x: 1 + 0.5 * x[:, 2])


def non_zonal_start():
    return grid_measure(lambda x: 1 + 0.5 * x[:, 2] + 0.3 * x[:, 0])


def final(res):
    return res.info["solution"].coefficients[-1]


def smooth_coefficients(L, fn):
    sht = mf.sphere_harmonic_transform(L, L + 1)
    x = sht.points.reshape(sht.nlat, sht.nlon, 3)
    c = sht.analysis(fn(x[..., 0], x[..., 1], x[..., 2]))
    return c / c[0, 0].real


@pytest.mark.parametrize("m", [0, 1, 7, 20])
def test_gradient_weights_identity(m):
    """(1 - z²) P̄'_lm = u_lm P̄_{l-1,m} - v_lm P̄_{l+1,m} against central differences of the table."""
    L, h = 40, 1e-6
    z = np.linspace(-0.95, 0.95, 9)
    u, v = _gradient_weights(L + 1)
    P = legendre_column(L + 1, m, z)  # columns l = m..L+1
    dP = (legendre_column(L + 1, m, z + h) - legendre_column(L + 1, m, z - h)) / (2 * h)
    l = np.arange(m, L + 1)
    lower = np.hstack([np.zeros((len(z), 1)), P[:, : L - m]])  # P̄_{l-1,m} (zero at l = m)
    rhs = u[l, m] * lower - v[l, m] * P[:, 1: L - m + 2]
    lhs = (1 - z * z)[:, None] * dP[:, : L - m + 1]
    assert np.abs(lhs - rhs).max() < 1e-7 * np.abs(lhs).max()


@pytest.mark.parametrize("l,m", [(1, 0), (5, 3), (30, 0), (30, 17)])
def test_gradient_of_a_harmonic_has_the_dirichlet_energy_l_l_plus_1(l, m):
    """|∇Y|² integrates to l(l+1) |Y|²: the gradient coefficients (sinθ ∂_θ, ∂_φ) synthesised on the grid."""
    disc = Sphere(usa(), 32)
    c = np.zeros((33, 33), complex)
    c[l, m] = 1.0
    St, Sp = disc.sht.synthesis(np.stack(disc._gradient(c)))
    f = disc.sht.synthesis(disc._up(c))
    w = disc.sht.w[:, None] / disc.sht.nlon
    dirichlet = np.sum(w * (St**2 + Sp**2) * disc.inv_s2)
    assert dirichlet == pytest.approx(l * (l + 1) * np.sum(w * f * f), rel=1e-12)


@pytest.mark.parametrize("kind", ["usa", "softmax"])
def test_weak_form_equals_the_strong_form_where_both_are_exact(kind):
    """-div(ρ∇Φ) = -½[Δ(ρΦ) + ρΔΦ - ΦΔρ] (the strong form, written here with the public transform) and
    the weak form agree on a smooth density at L = 24 (softmax: Φ = (1/a) log Z, analysed at degree 64), to
    the strong form's own round-off (its factor l(l+1): measured 1.9e-12 of the largest rate)."""
    model = MultiHead.scalar([1.0, 0.5], d=3, beta=2.0, kind=kind)
    L = 24
    c = smooth_coefficients(L, lambda x, y, z: np.exp(0.8 * z + 0.5 * x * y + 0.3 * y))
    sht = mf.sphere_harmonic_transform(64, 100)
    C = np.zeros((65, 65), complex)
    C[: L + 1, : L + 1] = c
    phi, zs = potential_multipliers(model, np.arange(65), 3)
    rho = sht.synthesis(C)
    Phi = sht.synthesis(phi[:, None] * C)
    for amp, z in zs:
        Phi = Phi + amp * np.log(sht.synthesis(z[:, None] * C))
    lap = sht.laplacian[:, None]
    lrho, P = sht.synthesis(lap * C), sht.analysis(Phi)
    lPhi = sht.synthesis(lap * P)
    G = sht.analysis(np.stack([rho * sht.synthesis(P), rho * lPhi - sht.synthesis(P) * lrho]))
    strong = (-0.5 * (lap * G[0] + G[1]))[: L + 1, : L + 1] * np.tri(L + 1, dtype=bool)
    weak = Sphere(model, L).rhs(c)
    assert np.abs(weak - strong).max() < 1e-11 * np.abs(strong).max()
    assert weak[0, 0] == 0.0  # mass


def test_rhs_floor_grows_like_l_not_l_squared():
    """The flow of a band-limited density is the same at every L (exact grid): degrees <= 60 agree between
    L = 64 and 256 to 1e-13, and the degrees the product cannot reach stay at a floor ~ eps l (measured
    5e-16 l; the strong form's reached 1.9e-10 at L = 256, 8e-13 l)."""
    c = np.zeros((65, 65), complex)
    c[:40, 0] = 0.5 ** np.arange(40)
    c[1:40, 1] = 0.3 * 0.5 ** np.arange(1, 40)
    f64 = Sphere(usa(), 64).rhs(c)
    big = np.zeros((257, 257), complex)
    big[:65, :65] = c
    f256 = Sphere(usa(), 256).rhs(big)
    assert np.abs(f256[:61, :61] - f64[:61, :61]).max() < 1e-13 * np.abs(f64).max()
    l = np.arange(120, 257)
    assert np.all(np.abs(f256[120:]).max(axis=1) < 2e-15 * l)


@pytest.mark.parametrize("L,t1,top", [(32, 0.5, 25), pytest.param(64, 1.0, 60, marks=pytest.mark.slow),
                                      pytest.param(128, 1.0, 60, marks=pytest.mark.slow),
                                      pytest.param(256, 1.0, 60, marks=pytest.mark.slow)])
def test_high_degrees_stay_at_round_off(L, t1, top):
    """The issue's example on the S^2 solver (a zonal start: the orders m != 0 are round-off too). At t = 1
    the true coefficients of degree >= 60 are below 1e-12, and so are the computed ones at every L (strong
    form: 4e-12, 3.5e-11, 1.5e-10 at L = 64, 128, 256; weak: 4e-15, 1.7e-14, 1.1e-14); at t = 0.5 the
    degrees >= 25 (below 1e-15 at L = 32 and at L = 64)."""
    c = final(mf.wasserstein_ascent(zonal_start(), usa(), t1=t1, n_saves=2, scheme="spectral", L=L, tol=0.5))
    assert np.abs(c[top:]).max() < 1e-12
    assert np.abs(c[:, 1:]).max() < 1e-12  # zonal stays zonal


@pytest.mark.slow
def test_issue_example_reaches_t_1_5_within_the_cap():
    """The S^2 solver refines on the issue's example to t = 1.5, where the true density needs L ~ 172 for
    a tail below 1e-10 (the issue's independent computation; the computed spectrum: 171): within the
    cap and within 2x of the need (measured L = 232, 457 steps; the issue reported a false refusal at t = 1.185)."""
    pts, w = mf.sphere_quadrature(3, n=8)
    mu0 = mf.GridMeasure.from_density(pts, 4 * np.pi * w, lambda x: 1 + 0.5 * x[:, 2])
    res = mf.wasserstein_ascent(mu0, usa(), t1=1.5, n_saves=4, scheme="spectral")
    assert res.info["L"] <= 2 * 172 and np.all(res.info["tail"] <= 1e-10)
