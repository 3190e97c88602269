"""The fast routes on both NUFFT libraries: each result within its own bound of the exact pass, the two
within the sum of their bounds of each other, and one ducc0 plan serving both transforms of a flow."""

import numpy as np
import pytest

from particles import sample_uniform
from particles._summation import routes
from particles.summation import exp_sums, fast_available

pytestmark = pytest.mark.skipif(not fast_available(), reason="finufft is not installed")
pytest.importorskip("ducc0")


@pytest.fixture(params=["ducc0", "finufft"])
def library(request, monkeypatch):
    monkeypatch.setattr(routes, "NUFFT_LIBRARY", [request.param])
    return request.param


def clustered(rng, n, d, k=3, spread=0.01):
    c = sample_uniform(k, d=d, rng=rng)
    x = c[rng.integers(0, k, n)] + spread * rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("d, route, heads", [(2, "circle", [1.0, 0.3]), (3, "scalar", [1.0, 0.5]),
                                             (5, "gauss", None)])
@pytest.mark.parametrize("tol", [1e-6, 1e-10])
def test_each_library_meets_its_bound(rng, library, d, route, heads, tol):
    x = clustered(rng, 1500, d) if d != 5 else sample_uniform(1500, d=d, rng=rng)
    if heads is None:
        Q, K = rng.standard_normal((2, d)) / np.sqrt(d), rng.standard_normal((2, d)) / np.sqrt(d)
        BM = 3.0 * (Q.T @ K)[None]
    else:
        BM = 8.0 * np.stack([v * np.eye(d) for v in heads])
    exact = exp_sums(BM, x, x, None, summation="exact")
    fast = exp_sums(BM, x, x, None, summation="fast", tol=tol, same_points=True)
    assert routes.nufft_library(1e-8) == library
    for e, f in zip(exact, fast):
        assert f.method == route and 0 < f.bound <= tol
        assert np.max(np.abs(np.expm1(f.logz - e.logz))) <= f.bound
        assert np.max(np.abs(f.mean - e.mean)) <= 2 * f.bound


def test_one_ducc0_plan_per_tolerance_and_point_set(rng, monkeypatch):
    """Targets that are the sources: both transforms at one tolerance share one plan (one sort of the
    points); the looser type-2 tolerance of the fast path or other targets take their own."""
    monkeypatch.setattr(routes, "NUFFT_LIBRARY", ["ducc0"])
    x, y = sample_uniform(800, d=3, rng=rng), sample_uniform(900, d=3, rng=rng)
    strengths = np.ones((1, 800), complex)
    tr = routes.Transforms(x, x, (9, 9, 9), 1e-9, same=True)
    tr.type2(tr.type1(strengths))
    assert len(tr._plans) == 1
    tr.type2(tr.type1(strengths), 1e-7)
    assert len(tr._plans) == 2
    other = routes.Transforms(x, y, (9, 9, 9), 1e-9)
    other.type2(other.type1(strengths))
    assert len(other._plans) == 2


def test_tolerances_below_ducc0s_reach_go_to_finufft(monkeypatch):
    monkeypatch.setattr(routes, "NUFFT_LIBRARY", ["ducc0"])
    assert routes.nufft_library(1e-10) == "ducc0" and routes.nufft_library(1e-13) == "finufft"


@pytest.mark.parametrize("eps", [1e-12, 1e-10, 1e-8, 1e-6])
def test_pointwise_error_per_unit_input_is_within_the_librarys_constant(rng, library, eps):
    """The bound's C: one unit mode (type 2) or one unit point (type 1) errs by at most C eps anywhere.
    By linearity this is the error per unit l1 norm of any input (FINUFFT errs up to ~5 eps)."""
    K = 16
    shape = (2 * K + 1,) * 3
    x = rng.uniform(-np.pi, np.pi, (100_000, 3))
    modes = np.array([(K, K, K), (-K, K, -K), (K, 0, 0), (0, 0, 0), (K - 1, K, -K)])
    grid = np.zeros((len(modes),) + shape, complex)
    for t, k in enumerate(modes):
        grid[(t,) + tuple(k + K)] = 1.0
    tr = routes.Transforms(x, x, shape, eps, same=True)
    C = routes.NUFFT_SAFETY[tr.library]
    assert np.max(np.abs(tr.type2(grid) - np.exp(1j * x @ modes.T).T)) <= C * eps
    one = np.zeros((1, x.shape[0]), complex)
    one[0, 0] = 1.0
    k = np.arange(-K, K + 1)
    exact = np.exp(-1j * (k[:, None, None] * x[0, 0] + k[None, :, None] * x[0, 1] + k[None, None, :] * x[0, 2]))
    assert np.max(np.abs(tr.type1(one)[0] - exact)) <= C * eps


def test_packed_columns_are_computed_as_if_alone(rng, library):
    """The a-posteriori bound does not pay for the complex packing: with Hermitian coefficients on the
    symmetric grid the computed operator is real, so Re of (c + i c y) through type 1, coefficients and
    type 2 is the output of c alone, and the output of c alone is real."""
    x = sample_uniform(3000, d=3, rng=rng)
    c = rng.random(3000)
    k = np.arange(-10, 11)
    g1 = np.exp(-0.5 * (0.4 * k) ** 2) * np.exp(-0.3j * k)  # Hermitian: g(-k) = conj g(k)
    kern = np.multiply.outer(np.multiply.outer(g1, g1), g1)
    tr = routes.Transforms(0.9 * x, 0.9 * x, kern.shape, 1e-6, same=True)
    packed = tr.type2(tr.type1((c + 1j * c * x[:, 0])[None]) * kern[None])[0]
    alone = tr.type2(tr.type1(c.astype(complex)[None]) * kern[None])[0]
    scale = c.sum() * np.abs(kern).sum()
    assert np.max(np.abs(alone.imag)) <= 1e-13 * scale
    assert np.max(np.abs(packed.real - alone.real)) <= 1e-13 * scale
    assert np.max(np.abs(alone.real)) > 1e-3 * scale  # not trivially zero


def test_scalar_heads_on_the_sphere_transform_the_weights_alone(rng, library, monkeypatch):
    """S = ±(x T + grad T / |a|) for scalar heads on S^2: one real type-1 column (not d + 1 packed in two),
    and the means of both signs of head still within the bound of the exact pass."""
    columns = []
    original = routes.Transforms.type1

    def counting(self, data):
        columns.append(data.shape[0])
        return original(self, data)

    monkeypatch.setattr(routes.Transforms, "type1", counting)
    x = sample_uniform(2000, d=3, rng=rng)
    BM = 6.0 * np.stack([np.eye(3), -0.5 * np.eye(3)])
    exact = exp_sums(BM, x, x, None, summation="exact")
    fast = exp_sums(BM, x, x, None, summation="fast", tol=1e-6, same_points=True)
    assert columns == [1]
    for e, f in zip(exact, fast):
        assert f.method == "scalar" and np.max(np.abs(f.mean - e.mean)) <= 2 * f.bound
        assert np.max(np.abs(f.mean - e.mean)) > 0  # not recomputed exactly


def test_tolerances_stay_where_the_constant_was_measured(rng, library, monkeypatch):
    """A loose tol does not send the transforms past eps = 1e-5 (ducc0 errs by 2.1 eps at 3e-4, above its C)."""
    asked = []
    original = routes.Transforms.__init__

    def recording(self, src, tgt, n_modes, eps, same=False):
        asked.append(eps)
        original(self, src, tgt, n_modes, eps, same)

    original_type2 = routes.Transforms.type2

    def recording2(self, data, eps=None):
        asked.append(self.eps if eps is None else eps)
        return original_type2(self, data, eps)

    monkeypatch.setattr(routes.Transforms, "__init__", recording)
    monkeypatch.setattr(routes.Transforms, "type2", recording2)
    x = sample_uniform(1500, d=3, rng=rng)
    (fast,) = exp_sums(3.0 * np.eye(3)[None], x, x, None, summation="fast", tol=0.1, same_points=True)
    (exact,) = exp_sums(3.0 * np.eye(3)[None], x, x, None, summation="exact")
    assert asked and max(asked) <= 1e-5
    assert np.max(np.abs(np.expm1(fast.logz - exact.logz))) <= fast.bound <= 0.1
