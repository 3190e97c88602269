"""The S^2 transforms on ducc0 against the Legendre tables (the reference), the axially symmetric path of
the S^2 solver against its full transforms, the fallback without ducc0 and the thread setting."""

import sys

import numpy as np
import pytest

import meanfield as mf
from meanfield._spectral import sht as sht_module
from meanfield._spectral import sphere as sphere_module
from meanfield._spectral.legendre import ring_synthesis_tables
from meanfield._spectral.sphere import Sphere
from particles import MultiHead
from particles.validation import InvalidParameterError

pytest.importorskip("ducc0")


def random_coefficients(L, seed=0):
    rng = np.random.default_rng(seed)
    C = np.tril(rng.standard_normal((L + 1, L + 1)) + 1j * rng.standard_normal((L + 1, L + 1)))
    C[:, 0] = C[:, 0].real
    return C


@pytest.mark.parametrize("L", [16, 64, 128, pytest.param(256, marks=pytest.mark.slow)])
def test_ducc0_transforms_agree_with_the_legendre_tables(L):
    """Synthesis and analysis on the solver's grid (3/2 oversampled): ducc0 and the tables agree to a few
    eps per degree (measured 9e-15, 9e-14, 5e-13 of max|f| at L = 64, 128, 256), and each inverts the other."""
    nlat = L + 1 + (L + 2) // 2 + 1
    fast, ref = (mf.sphere_harmonic_transform(L, nlat, backend=b) for b in ("ducc0", "tables"))
    C = random_coefficients(L)
    f, g = fast.synthesis(C), ref.synthesis(C)
    assert np.abs(f - g).max() < 1e-15 * L * L * np.abs(g).max()
    np.testing.assert_allclose(fast.analysis(g), C, rtol=0, atol=5e-15 * L * L)
    np.testing.assert_allclose(ref.analysis(f), C, rtol=0, atol=5e-15 * L * L)
    np.testing.assert_allclose(fast.analysis(g, L=L // 2), ref.analysis(g, L=L // 2), rtol=0, atol=5e-15 * L * L)


def test_ring_synthesis_is_the_density_on_a_product_grid():
    """ρ on sphere_quadrature(3, n=n) by ring synthesis (ducc0), by the tables' rings and by the pointwise
    recurrence (the same points, shuffled so the grid is not recognised)."""
    L, n = 40, 48
    C = random_coefficients(L, 1)
    pts, _ = mf.sphere_quadrature(3, n=n)
    z = pts.reshape(n, 2 * n, 3)[:, 0, 2]
    fast = sphere_module._sphere_density(C, pts)
    tol = 1e-13 * np.abs(fast).max()  # measured 2e-14
    np.testing.assert_allclose(fast, ring_synthesis_tables(C, z, 2 * n).ravel(), rtol=0, atol=tol)
    order = np.random.default_rng(0).permutation(len(pts))
    np.testing.assert_allclose(sphere_module._sphere_density(C, pts[order]), fast[order], rtol=0, atol=tol)


@pytest.mark.parametrize("kind", ["usa", "softmax"])
def test_axially_symmetric_rhs_equals_the_full_transforms(kind):
    """A zonal density: the order-0 discretisation (one Legendre matrix) gives the flow of the full
    transforms to their round-off (measured 4e-14 of the largest rate, at degrees the flow does not reach),
    whose orders m >= 1 are round-off."""
    L = 48
    model = MultiHead.scalar([1.0, 0.5], d=3, beta=2.0, kind=kind)
    c = np.zeros((L + 1, L + 1), complex)
    c[:30, 0] = 0.6 ** np.arange(30)
    axial = Sphere(model, L, axial=True).rhs(c[:, :1])
    full = Sphere(model, L).rhs(c)
    assert axial.shape == (L + 1, 1)
    assert np.abs(full[:, 1:]).max() < 1e-15 * np.abs(full).max()
    np.testing.assert_allclose(axial[:, 0], full[:, 0], rtol=0, atol=2e-13 * np.abs(full).max())


def test_a_zonal_start_runs_on_the_order_0_column_and_matches_the_full_solver(monkeypatch):
    """The S^2 solver on a density symmetric about the pole: same coefficients as the full transforms (the
    orders m >= 1 forced on by a threshold below their round-off), saved as square arrays."""
    pts, w = mf.sphere_quadrature(3, n=24)
    mu0 = mf.GridMeasure.from_density(pts, 4 * np.pi * w, lambda x: np.exp(1.5 * x[:, 2]))
    model = MultiHead.scalar([1.0], d=3, beta=2.0, kind="usa")
    run = lambda: mf.wasserstein_ascent(mu0, model, t1=0.5, n_saves=3, scheme="spectral", L=32,  # noqa: E731
                                        tol=0.5).info["solution"].coefficients
    axial = run()
    monkeypatch.setattr(sphere_module, "AXIAL_ROUNDOFF", -1.0)
    full = run()
    assert axial[-1].shape == full[-1].shape == (33, 33)
    assert not np.any(axial[-1][:, 1:]) and np.abs(full[-1][:, 1:]).max() < 1e-15
    np.testing.assert_allclose(axial[-1], full[-1], rtol=0, atol=1e-13)


def test_without_ducc0_the_tables_serve_and_refuse_clearly(monkeypatch):
    monkeypatch.setitem(sys.modules, "ducc0", None)  # import ducc0 raises ImportError
    assert sht_module.sht_backend() == "tables"
    sht = mf.sphere_harmonic_transform(8, 10)
    assert sht.backend == "tables"
    with pytest.raises(InvalidParameterError, match=r"backend='ducc0' .* needs the ducc0 package: pip install "
                                                    r"\"headflow\[sht\]\""):
        mf.sphere_harmonic_transform(8, 10, backend="ducc0")
    with pytest.raises(InvalidParameterError, match=r"L=1025 .* above the cap 1024 of the 'tables' backend"):
        mf.sphere_harmonic_transform(1025, 1100)
    C = random_coefficients(8)
    np.testing.assert_allclose(sht_module.ring_synthesis(C, sht.z, 20), sht.synthesis(C), rtol=0, atol=1e-13)


def test_the_axial_column_stays_real_when_the_band_limit_grows():
    """Refinement pads the state at the new band limit: the order-0 column stays real (half the work of
    complex arithmetic), and the saved coefficients are square complex arrays."""
    model = MultiHead.scalar([1.0], d=3, beta=2.0, kind="usa")
    disc = Sphere(model, 32, axial=True)
    c = np.linspace(1.0, 0.1, 17)[:, None]
    grown = disc.pad(c)
    assert grown.dtype == float and grown.shape == (33, 1) and np.array_equal(grown[:17], c)
    square = disc.pad(c, square=True)
    assert square.dtype == complex and square.shape == (33, 33) and not np.any(square[:, 1:])
