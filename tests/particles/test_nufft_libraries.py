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
    c = sample_uniform(k, d, rng)
    x = c[rng.integers(0, k, n)] + spread * rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("d, route, heads", [(2, "circle", [1.0, 0.3]), (3, "scalar", [1.0, 0.5]),
                                             (5, "gauss", None)])
@pytest.mark.parametrize("tol", [1e-6, 1e-10])
def test_each_library_meets_its_bound(rng, library, d, route, heads, tol):
    x = clustered(rng, 1500, d) if d != 5 else sample_uniform(1500, d, rng)
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


def test_one_ducc0_plan_serves_both_transforms_of_a_flow(rng, monkeypatch):
    """Targets that are the sources: one plan (one sort of the points); other targets: two."""
    monkeypatch.setattr(routes, "NUFFT_LIBRARY", ["ducc0"])
    x, y = sample_uniform(800, 3, rng), sample_uniform(900, 3, rng)
    made = []
    original = routes.Transforms._ducc0_plan

    def counting(self, kind):
        plan = original(self, kind)
        made.append(id(plan))
        return plan

    monkeypatch.setattr(routes.Transforms, "_ducc0_plan", counting)
    exp_sums(4.0 * np.eye(3)[None], x, x, None, summation="fast", same_points=True)
    assert len(set(made)) == 1
    made.clear()
    exp_sums(4.0 * np.eye(3)[None], x, y, None, summation="fast")
    assert len(set(made)) == 2


def test_tolerances_below_ducc0s_reach_go_to_finufft(monkeypatch):
    monkeypatch.setattr(routes, "NUFFT_LIBRARY", ["ducc0"])
    assert routes.nufft_library(1e-10) == "ducc0" and routes.nufft_library(1e-13) == "finufft"
